package flowui_test

import (
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/fixture"
)

// GET /api/runs searches as the runs page does: by ID prefix, error or
// reason text and an input field (issue 22).
func TestAPIRunsSearch(t *testing.T) {
	t.Parallel()
	srv, _ := mounted(t, nil)
	a := newAPIClient(t, srv.URL)
	for _, tt := range []struct {
		query string
		want  string
	}{
		{"id=sag", fixture.SagaRun},
		{"error=card+DECLINED&workflow=pay_order", fixture.SagaRun},
		{"input=item%3Dsofa", fixture.StuckRun},
	} {
		var list struct{ Runs []flow.RunInfo }
		if code := a.call("GET", "/runs?"+tt.query, "", &list); code != 200 || len(list.Runs) != 1 || list.Runs[0].ID != tt.want {
			t.Errorf("/api/runs?%s: %d %+v, want %s", tt.query, code, list.Runs, tt.want)
		}
	}
	var bad struct{ Error string }
	if code := a.call("GET", "/runs?input=item", "", &bad); code != 400 || bad.Error == "" {
		t.Errorf("/api/runs?input=item: %d %+v, want 400", code, bad)
	}
}

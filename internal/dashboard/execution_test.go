package dashboard

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// The run page of a run that continued as new shows its execution; a run
// in its first execution shows none.
func TestRunPageExecution(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)
	wf := flow.Workflow[int, int]{Name: "continuing", Run: func(wc flow.Context, n int) (int, error) {
		if n == 0 {
			return 0, nil
		}
		return 0, flow.ContinueAsNew(wc, n-1)
	}}
	flow.Register(e, wf)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for id, n := range map[string]int{"looped": 2, "once": 0} {
		run, err := flow.Start(ctx, e, wf, n, &flow.StartOptions{RunID: id})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run.Result(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if body := do(t, http.MethodGet, srv.URL+"/runs/looped", nil).body; !strings.Contains(body, `<dd id="run-execution">3 <span class="muted">continued as new`) {
		t.Errorf("run page of looped lacks execution 3")
	}
	if body := do(t, http.MethodGet, srv.URL+"/runs/once", nil).body; strings.Contains(body, `id="run-execution"`) {
		t.Errorf("run page of a run in its first execution shows one")
	}
}

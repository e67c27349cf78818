package dashboard

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/fixture"
)

// The run page shows what a run was started with: its unique key and its
// timeout (not yet a deadline while the run waits for its first claim).
func TestRunPageStartOptions(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)
	flow.Register(e, fixture.DoneWorkflow)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := flow.Start(ctx, e, fixture.DoneWorkflow, fixture.Order{Item: "desk"}, &flow.StartOptions{
		RunID: "opts-1", UniqueKey: "desk-order", Timeout: 90 * time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	body := do(t, http.MethodGet, srv.URL+"/runs/opts-1", nil).body
	for _, want := range []string{
		"<dt>Unique key</dt><dd><code>desk-order</code></dd>",
		`<dd id="run-timeout">1m30s from its first claim (not claimed yet: no deadline from it)</dd>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("run page lacks %s", want)
		}
	}
}

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

// The run page shows what a run was started with: its unique key, its
// timeout (not yet a deadline while the run waits for its first claim)
// and its context values.
func TestRunPageStartOptions(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)
	flow.Register(e, fixture.DoneWorkflow)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := flow.Start(flow.WithValue(ctx, "tenant", "acme"), e, fixture.DoneWorkflow, fixture.Order{Item: "desk"}, &flow.StartOptions{
		RunID: "opts-1", UniqueKey: "desk-order", Timeout: 90 * time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	body := do(t, http.MethodGet, srv.URL+"/runs/opts-1", nil).body
	for _, want := range []string{
		"<dt>Unique key</dt><dd><code>desk-order</code></dd>",
		`<dd id="run-timeout">1m30s from its first claim (not claimed yet: no deadline from it)</dd>`,
		`<dd id="run-values"><code>tenant=acme</code> </dd>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("run page lacks %s", want)
		}
	}
}

// The run page of a detached child marks it beside its parent.
func TestRunPageDetachedChild(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)
	child := flow.Workflow[int, int]{Name: "kid", Run: func(wc flow.Context, n int) (int, error) { return n, nil }}
	parent := flow.Workflow[int, int]{Name: "dad", Run: func(wc flow.Context, n int) (int, error) {
		c, err := flow.StartChild(wc, child, n, &flow.ChildOptions{RunID: "kid-1", Detached: true})
		if err != nil {
			return 0, err
		}
		return c.Result(wc)
	}}
	flow.Register(e, child)
	flow.Register(e, parent)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(ctx)
	r, err := flow.Start(ctx, e, parent, 3, &flow.StartOptions{RunID: "dad-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Result(ctx); err != nil {
		t.Fatal(err)
	}
	body := do(t, http.MethodGet, srv.URL+"/runs/kid-1", nil).body
	if !strings.Contains(body, `<a href="/runs/dad-1">dad-1</a> <span class="badge" id="run-detached"`) {
		t.Errorf("run page of a detached child lacks the mark:\n%s", body)
	}
}

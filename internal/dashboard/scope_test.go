package dashboard

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// The run page shows a cancelled scope's calls: the sleep its cancel
// ended, failed with "scope cancelled", and the cancel itself, labelled
// by their scope.
func TestRunPageCancelledScope(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)
	wf := flow.Workflow[int, int]{Name: "scoped", Run: func(wc flow.Context, n int) (int, error) {
		sc, cancel := flow.WithCancel(wc)
		_, err := flow.All(sc,
			func(b flow.Context) (int, error) {
				if err := flow.Sleep(b, time.Hour); !errors.Is(err, flow.ErrScopeCancelled) {
					return 0, err
				}
				return 0, nil
			},
			func(b flow.Context) (int, error) {
				if err := flow.Sleep(b, time.Millisecond); err != nil {
					return 0, err
				}
				cancel()
				return 0, nil
			})
		return n, err
	}}
	flow.Register(e, wf)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(ctx)
	r, err := flow.Start(ctx, e, wf, 1, &flow.StartOptions{RunID: "scoped-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Result(ctx); err != nil {
		t.Fatal(err)
	}
	body := do(t, http.MethodGet, srv.URL+"/runs/scoped-1", nil).body
	for _, want := range []string{"flow.sleep (scope 1, 1 of 2)", "flow.cancel (scope 1)", "scope cancelled", "scope_cancelled"} {
		if !strings.Contains(body, want) {
			t.Errorf("run page lacks %q", want)
		}
	}
}

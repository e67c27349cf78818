package dashboard

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// The run page of a job that keeps a lean record shows its whole history,
// the three events its record derives marked as such, and the scrubber
// steps through them.
func TestRunPageLeanRecord(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)
	job := flow.Job[int]{Name: "lean_page", Record: flow.LeanRecord, Handler: func(context.Context, int) error { return nil }}
	flow.RegisterJob(e, job)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(ctx)
	r, err := flow.Enqueue(ctx, e, job, 1, &flow.EnqueueOptions{RunID: "lean-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Result(ctx); err != nil {
		t.Fatal(err)
	}
	body := do(t, http.MethodGet, srv.URL+"/runs/lean-1", nil).body
	if n := strings.Count(body, `<span class="badge derived"`); n != 3 {
		t.Errorf("run page marks %d events derived, want 3", n)
	}
	for _, kind := range []string{"run_claimed", "step_started", "step_completed"} {
		if !strings.Contains(body, "<td>"+kind+` <span class="badge derived"`) {
			t.Errorf("run page lacks the derived %s", kind)
		}
	}
	// After the derived step start (the third event) the step runs.
	past := do(t, http.MethodGet, srv.URL+"/runs/lean-1?at=3", nil)
	if past.status != http.StatusOK || !strings.Contains(past.body, "status-running") {
		t.Errorf("the run after its third event: %d, running not shown", past.status)
	}
}

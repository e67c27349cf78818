package dashboard

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/fixture"
)

// A delayed run offers "Run now" behind a confirmation page, which makes it
// due now; a finished run offers "Delete", which deletes it and lands on
// the runs list. Refusals are conflicts that change nothing.
func TestRunNowAndDelete(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)
	ctx := context.Background()
	flow.Register(e, fixture.DoneWorkflow)
	if _, err := flow.Start(ctx, e, fixture.DoneWorkflow, fixture.Order{Item: "chair"}, &flow.StartOptions{RunID: "delayed-1", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	same := map[string]string{"Sec-Fetch-Site": "same-origin"}

	page := do(t, http.MethodGet, srv.URL+"/runs/delayed-1", nil)
	if !strings.Contains(page.body, `id="action-run-now"`) || strings.Contains(page.body, `id="action-delete"`) {
		t.Errorf("a delayed run's page does not offer run-now alone among run-now and delete")
	}
	if r := do(t, http.MethodGet, srv.URL+"/runs/delayed-1/run-now", nil); !strings.Contains(r.body, `<form method="post" action="/runs/delayed-1/run-now">`) {
		t.Errorf("run-now confirmation page: %d %s", r.status, r.body)
	}
	r := do(t, http.MethodPost, srv.URL+"/runs/delayed-1/run-now", same)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/runs/delayed-1?done=run-now" {
		t.Fatalf("run-now: %d %s", r.status, r.header.Get("Location"))
	}
	info, err := e.Inspect(ctx, "delayed-1")
	if err != nil || time.Until(info.RunAt) > time.Minute {
		t.Errorf("after run-now: due at %s, %v; want now", info.RunAt, err)
	}
	if r := do(t, http.MethodGet, srv.URL+"/runs/delayed-1?done=run-now", nil); !strings.Contains(r.body, "Run made due now") || strings.Contains(r.body, `id="action-run-now"`) {
		t.Errorf("after run-now: no message, or run-now still offered")
	}
	if r := do(t, http.MethodPost, srv.URL+"/runs/done-1/run-now", same); r.status != http.StatusConflict || !strings.Contains(r.body, "run is completed") {
		t.Errorf("run-now of a completed run: %d", r.status)
	}

	if r := do(t, http.MethodGet, srv.URL+"/runs/done-1", nil); !strings.Contains(r.body, `id="action-delete"`) {
		t.Errorf("a completed run's page does not offer delete")
	}
	if r := do(t, http.MethodGet, srv.URL+"/runs/done-1/delete", nil); !strings.Contains(r.body, `<form method="post" action="/runs/done-1/delete">`) {
		t.Errorf("delete confirmation page: %d", r.status)
	}
	if _, err := e.Inspect(ctx, doneRun); err != nil {
		t.Fatalf("GET of the confirmation page deleted the run: %v", err)
	}
	r = do(t, http.MethodPost, srv.URL+"/runs/done-1/delete", same)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/runs?done=delete" {
		t.Fatalf("delete: %d %s", r.status, r.header.Get("Location"))
	}
	if _, err := e.Inspect(ctx, doneRun); !errors.Is(err, flow.ErrRunNotFound) {
		t.Errorf("after delete: %v, want not found", err)
	}
	if r := do(t, http.MethodGet, srv.URL+"/runs?done=delete", nil); !strings.Contains(r.body, "Run deleted.") || strings.Contains(r.body, `data-run="done-1"`) {
		t.Errorf("runs page after delete: no message, or the run is still listed")
	}
	if r := do(t, http.MethodPost, srv.URL+"/runs/pending-1/delete", same); r.status != http.StatusConflict || !strings.Contains(r.body, "not finished") {
		t.Errorf("delete of a pending run: %d", r.status)
	}
	if st := status(t, e, pendingRun); st != flow.StatusPending {
		t.Errorf("refused delete changed the run: %s", st)
	}
}

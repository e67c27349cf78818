package dashboard

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/fixture"
)

// postForm posts form values from the dashboard's own origin.
func postForm(t *testing.T, target string, form url.Values) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, string(b), resp.Header}
}

// A pending run's page offers "Change due time", whose confirmation page
// asks for the time; a duration from now or an RFC 3339 time moves it, a
// time that is neither is a 400 and a finished run a 409, changing nothing.
func TestRunAtAction(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)
	ctx := context.Background()
	flow.Register(e, fixture.DoneWorkflow)
	if _, err := flow.Start(ctx, e, fixture.DoneWorkflow, fixture.Order{Item: "chair"}, &flow.StartOptions{RunID: "delayed-2", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if page := do(t, http.MethodGet, srv.URL+"/runs/delayed-2", nil); !strings.Contains(page.body, `id="action-run-at"`) {
		t.Fatal("a delayed run's page does not offer run-at")
	}
	if page := do(t, http.MethodGet, srv.URL+"/runs/delayed-2/run-at?at=3h", nil); !strings.Contains(page.body, `name="at" value="3h"`) {
		t.Fatalf("run-at confirmation page lacks its field: %s", page.body)
	}
	r := postForm(t, srv.URL+"/runs/delayed-2/run-at", url.Values{"at": {"3h"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/runs/delayed-2?done=run-at" {
		t.Fatalf("run-at: %d %s %s", r.status, r.header.Get("Location"), r.body)
	}
	info, _ := e.Inspect(ctx, "delayed-2")
	if left := time.Until(info.RunAt); left < 2*time.Hour+50*time.Minute || left > 3*time.Hour {
		t.Errorf("after run-at 3h: due in %s", left)
	}
	at := time.Now().Add(90 * time.Minute).UTC().Truncate(time.Second)
	if r := postForm(t, srv.URL+"/runs/delayed-2/run-at", url.Values{"at": {at.Format(time.RFC3339)}}); r.status != http.StatusSeeOther {
		t.Fatalf("run-at %s: %d %s", at.Format(time.RFC3339), r.status, r.body)
	}
	if info, _ := e.Inspect(ctx, "delayed-2"); !info.RunAt.Equal(at) {
		t.Errorf("after run-at %s: due %s", at, info.RunAt)
	}
	for _, v := range []string{"tomorrow", ""} {
		r := postForm(t, srv.URL+"/runs/delayed-2/run-at", url.Values{"at": {v}})
		if r.status != http.StatusBadRequest {
			t.Errorf("run-at %q: %d, want 400", v, r.status)
		}
	}
	if info, _ := e.Inspect(ctx, "delayed-2"); !info.RunAt.Equal(at) {
		t.Errorf("a refused run-at moved the run to %s", info.RunAt)
	}
	if r := postForm(t, srv.URL+"/runs/done-1/run-at", url.Values{"at": {"1h"}}); r.status != http.StatusConflict || !strings.Contains(r.body, "run is completed") {
		t.Errorf("run-at of a completed run: %d", r.status)
	}
}

// The steps of a finished run offer "Reset from here" and "Fork from
// here", whose confirmation pages carry the step; a dead letter offers
// "Revive". Each leads to the run it leaves the operator on, and a
// refusal is a 409 that changes nothing.
func TestResetForkReviveActions(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)
	ctx := context.Background()

	page := do(t, http.MethodGet, srv.URL+"/runs/done-1", nil)
	for _, id := range []string{`id="reset-reserve#0"`, `id="fork-ship#0"`} {
		if !strings.Contains(page.body, id) {
			t.Errorf("a completed run's page lacks %s", id)
		}
	}
	if strings.Contains(page.body, `id="action-revive"`) || strings.Contains(page.body, `id="action-reset"`) {
		t.Error("a completed run's page offers revive, or reset among the run's actions")
	}
	if r := do(t, http.MethodGet, srv.URL+"/runs/done-1/reset?step=ship%230", nil); !strings.Contains(r.body, `name="step" value="ship#0"`) {
		t.Fatalf("reset confirmation page lacks its step: %s", r.body)
	}
	r := postForm(t, srv.URL+"/runs/done-1/reset", url.Values{"step": {"ship#0"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/runs/done-1?done=reset" {
		t.Fatalf("reset: %d %s %s", r.status, r.header.Get("Location"), r.body)
	}
	if info, _ := e.Inspect(ctx, "done-1"); info.Status != flow.StatusPending || len(info.Steps) != 1 {
		t.Errorf("after reset: %s with %d steps", info.Status, len(info.Steps))
	}

	r = postForm(t, srv.URL+"/runs/saga-1/fork", url.Values{"step": {"reserve#0"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/runs/saga-1%2Ffork-1?done=fork" {
		t.Fatalf("fork: %d %s %s", r.status, r.header.Get("Location"), r.body)
	}
	if page := do(t, http.MethodGet, srv.URL+"/runs/saga-1", nil); !strings.Contains(page.body, `id="action-revive"`) {
		t.Error("a dead letter's page does not offer revive")
	}
	before, _ := e.History(ctx, "saga-1")
	if r := postForm(t, srv.URL+"/runs/saga-1/reset", url.Values{"step": {"charge#0"}}); r.status != http.StatusConflict || !strings.Contains(r.body, "was compensated") {
		t.Errorf("reset past a compensated step: %d %s", r.status, r.body)
	}
	if r := postForm(t, srv.URL+"/runs/saga-1/reset", url.Values{"step": {"nope"}}); r.status != http.StatusNotFound || !strings.Contains(r.body, "never reached step nope#0") {
		t.Errorf("reset from a step never reached: %d", r.status)
	}
	if after, _ := e.History(ctx, "saga-1"); len(after) != len(before) {
		t.Error("refused resets changed the history")
	}
	if r := postForm(t, srv.URL+"/runs/saga-1/revive", nil); r.status != http.StatusSeeOther {
		t.Fatalf("revive: %d %s", r.status, r.body)
	}
	if info, _ := e.Inspect(ctx, "saga-1"); info.Status != flow.StatusPending {
		t.Errorf("after revive: %s", info.Status)
	}
}

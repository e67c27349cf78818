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

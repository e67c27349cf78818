package flowui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/fixture"
)

// apiClient calls the JSON API of srv with the CSRF token.
type apiClient struct {
	t     *testing.T
	c     *http.Client
	base  string
	token string
}

func newAPIClient(t *testing.T, base string) *apiClient {
	t.Helper()
	a := &apiClient{t: t, c: client(t), base: base + prefix + "/api"}
	var tok struct{ Token string }
	if code := a.call("GET", "/csrf", "", &tok); code != http.StatusOK || tok.Token == "" {
		t.Fatalf("GET /api/csrf: %d", code)
	}
	a.token = tok.Token
	return a
}

// call sends a request and decodes the JSON answer into out; it returns
// the status.
func (a *apiClient) call(method, path, body string, out any) int {
	a.t.Helper()
	resp, b := do(a.t, a.c, method, a.base+path, http.Header{"X-Csrf-Token": {a.token}, "Content-Type": {"application/json"}}, body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		a.t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(b), out); err != nil {
			a.t.Fatalf("%s %s: %d, decode %q: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// TestAPIRead: runs with filters, one run, its history, queues, and the
// errors of bad requests.
func TestAPIRead(t *testing.T) {
	t.Parallel()
	srv, _ := mounted(t, nil)
	a := newAPIClient(t, srv.URL)

	var list struct {
		Runs []flow.RunInfo
		More bool
	}
	if code := a.call("GET", "/runs", "", &list); code != 200 || len(list.Runs) != 4 || list.More {
		t.Errorf("all runs: %d, %d runs (more %v), want the fixture's 4", code, len(list.Runs), list.More)
	}
	if code := a.call("GET", "/runs?status=FAILED", "", &list); code != 200 || len(list.Runs) != 1 || list.Runs[0].ID != fixture.SagaRun {
		t.Errorf("failed runs: %d %+v, want %s", code, list.Runs, fixture.SagaRun)
	}
	if code := a.call("GET", "/runs?queue=batch", "", &list); code != 200 || len(list.Runs) != 1 || list.Runs[0].ID != fixture.PendingRun {
		t.Errorf("runs of queue batch: %d %+v", code, list.Runs)
	}
	if code := a.call("GET", "/runs?limit=2", "", &list); code != 200 || len(list.Runs) != 2 || !list.More {
		t.Errorf("limit 2: %d, %d runs, more %v", code, len(list.Runs), list.More)
	}
	var run flow.RunInfo
	if code := a.call("GET", "/runs/"+fixture.SagaRun, "", &run); code != 200 || run.Status != flow.StatusFailed || len(run.Steps) != 3 {
		t.Errorf("run %s: %d %s with %d steps", fixture.SagaRun, code, run.Status, len(run.Steps))
	}
	var hist struct {
		Run    string
		Events []flow.Event
	}
	if code := a.call("GET", "/runs/"+fixture.SagaRun+"/history", "", &hist); code != 200 || hist.Run != fixture.SagaRun || len(hist.Events) < 8 {
		t.Errorf("history: %d, %d events", code, len(hist.Events))
	}
	var queues struct{ Queues []flow.QueueStats }
	if code := a.call("GET", "/queues", "", &queues); code != 200 || len(queues.Queues) == 0 {
		t.Errorf("queues: %d %+v", code, queues)
	}
	found := false
	for _, q := range queues.Queues {
		found = found || q.Queue == "batch" && q.Counts[flow.StatusPending] == 1
	}
	if !found {
		t.Errorf("queues: no queue batch with its pending run: %+v", queues.Queues)
	}

	var e struct{ Error string }
	for _, c := range []struct {
		method, path, body string
		status             int
		msg                string
	}{
		{"GET", "/runs?status=lost", "", 400, "unknown status"},
		{"GET", "/runs?limit=0", "", 400, "invalid limit"},
		{"GET", "/runs/nope", "", 404, "not found"},
		{"GET", "/runs/nope/history", "", 404, "not found"},
		{"GET", "/nothing", "", 404, "no API endpoint"},
		{"POST", "/runs/" + fixture.DoneRun + "/explode", "", 404, "no action"},
		{"POST", "/runs/" + fixture.DoneRun + "/cancel", "", 409, "cancel run"},
		{"POST", "/runs/" + fixture.DoneRun + "/signal", `{"name":"go"}`, 409, "signal run"},
		{"POST", "/runs/" + fixture.PendingRun + "/signal", `{"payload":1}`, 400, "empty name"},
		{"POST", "/runs/" + fixture.PendingRun + "/signal", `{"name":`, 400, "bad body"},
	} {
		if code := a.call(c.method, c.path, c.body, &e); code != c.status || !strings.Contains(e.Error, c.msg) {
			t.Errorf("%s %s: %d %q, want %d with %q", c.method, c.path, code, e.Error, c.status, c.msg)
		}
	}
}

// TestAPIActions: every action changes the database as its name says.
func TestAPIActions(t *testing.T) {
	t.Parallel()
	srv, e := mounted(t, nil)
	a := newAPIClient(t, srv.URL)
	var act struct{ Action, Run, Next string }

	var sig struct {
		Run, Signal string
		Sent        bool
	}
	if code := a.call("POST", "/runs/"+fixture.PendingRun+"/signal", `{"name":"approve","payload":{"ok":true},"key":"k1"}`, &sig); code != 200 || !sig.Sent {
		t.Errorf("signal: %d %+v", code, sig)
	}
	if code := a.call("POST", "/runs/"+fixture.PendingRun+"/signal", `{"name":"approve","payload":{"ok":true},"key":"k1"}`, &sig); code != 200 || sig.Sent {
		t.Errorf("signal with the same key again: %d %+v, want sent false", code, sig)
	}
	if code := a.call("POST", "/runs/"+fixture.PendingRun+"/run-now", "", &act); code != 200 || act.Next != fixture.PendingRun {
		t.Errorf("run-now: %d %+v", code, act)
	}
	if code := a.call("POST", "/runs/"+fixture.SagaRun+"/retry", "", &act); code != 200 || !strings.HasPrefix(act.Next, fixture.SagaRun+"/requeue-") {
		t.Errorf("retry: %d %+v", code, act)
	}
	if info := status(t, e, fixture.SagaRun); info.RequeuedAs != act.Next {
		t.Errorf("after retry the dead letter is requeued as %q, want %q", info.RequeuedAs, act.Next)
	}
	// A run ID with a slash is one escaped path segment.
	var requeued flow.RunInfo
	if code := a.call("GET", "/runs/"+url.PathEscape(act.Next), "", &requeued); code != 200 || requeued.ID != act.Next || requeued.RequeuedFrom != fixture.SagaRun {
		t.Errorf("GET the requeued run %s: %d %+v", act.Next, code, requeued)
	}
	if code := a.call("POST", "/runs/"+url.PathEscape(act.Next)+"/cancel", "", &act); code != 200 || act.Run != requeued.ID {
		t.Errorf("cancel the requeued run: %d %+v", code, act)
	}
	if code := a.call("POST", "/runs/"+fixture.StuckRun+"/skip", "", &act); code != 200 {
		t.Errorf("skip: %d %+v", code, act)
	}
	if code := a.call("POST", "/runs/"+fixture.DoneRun+"/delete", "", &act); code != 200 || act.Next != "" {
		t.Errorf("delete: %d %+v", code, act)
	}
	var gone struct{ Error string }
	if code := a.call("GET", "/runs/"+fixture.DoneRun, "", &gone); code != 404 {
		t.Errorf("deleted run: %d, want 404", code)
	}
}

// TestAPIChanges: /api/changes streams the change feed, in position
// order, from the position a client names.
func TestAPIChanges(t *testing.T) {
	t.Parallel()
	srv, e := mounted(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var all []flow.Change
	for c, err := range e.Changes(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, c)
	}
	if len(all) < 2 {
		t.Fatalf("the fixture has %d changes, want several", len(all))
	}
	from := all[0].Position
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+prefix+"/api/changes?after="+strconv.FormatInt(from, 10), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /api/changes: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	var ids []string
	for len(ids) < len(all)-1 && sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			ids = append(ids, id)
		}
	}
	for i, id := range ids {
		if want := strconv.FormatInt(all[i+1].Position, 10); id != want {
			t.Fatalf("event %d has id %s, want %s (the change after %d)", i, id, want, from)
		}
	}
	if len(ids) != len(all)-1 {
		t.Fatalf("%d events, want %d: %v", len(ids), len(all)-1, sc.Err())
	}
}

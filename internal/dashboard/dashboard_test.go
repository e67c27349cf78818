package dashboard

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/fixture"
	"github.com/flowlite/flowlite/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.Cleanup(pgtest.OwnDatabase())) }

type response struct {
	status int
	body   string
	header http.Header
}

func do(t *testing.T, method, url string, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
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

func status(t *testing.T, e *flow.Engine, id string) flow.RunStatus {
	t.Helper()
	info, err := e.Inspect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return info.Status
}

func TestPages(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, fixtureDB(t), nil)
	for _, tt := range []struct {
		path   string
		status int
		want   []string
	}{
		{"/", 200, []string{`class="card status-suspended"`, ">all runs<", `href="/runs?queue=batch"`, `id="last-checkpoint"`, `id="engines-hidden">1 stopped engine not shown. <a href="/?engines=all">`}},
		{"/?engines=all", 200, []string{`<table class="grid" id="engines">`, `<td>stopped</td>`}},
		{"/runs", 200, []string{`data-run="done-1"`, `data-run="pending-1"`, `id="filters"`}},
		{"/runs?status=failed", 200, []string{`data-run="saga-1"`, `<option value="failed" selected>`}},
		{"/runs?status=FAILED&workflow=nope", 200, []string{"No runs match."}},
		{"/runs?queue=batch", 200, []string{`data-run="pending-1"`}},
		{"/runs?limit=1", 200, []string{"Showing the newest 1 runs"}},
		{"/runs/saga-1", 200, []string{`id="timeline"`, "compensation_completed", "card declined", `class="bar comp-completed"`}},
		{"/runs/pending-1", 200, []string{"No steps recorded.", `id="action-cancel"`}},
		{"/runs/stuck-1", 200, []string{`id="action-resume"`, `id="action-skip"`, `id="action-cancel"`, "warehouse unreachable"}},
		{"/runs/stuck-1/resume", 200, []string{`<form method="post" action="/runs/stuck-1/resume">`, `id="confirm"`}},
		{"/suspended", 200, []string{`data-run="stuck-1"`, `href="/runs/stuck-1/skip"`}},
		{"/dead", 200, []string{"Dead letters"}},
		{"/static/style.css", 200, []string{"--comp:"}},
		{"/runs/nope", 404, []string{"run nope: not found"}},
		{"/runs/nope/resume", 404, []string{"not found"}},
		{"/runs/stuck-1/explode", 404, []string{`No action &#34;explode&#34;`}},
		{"/runs?status=bogus", 400, []string{"Unknown status"}},
		{"/runs?limit=0", 400, []string{"Invalid limit"}},
		{"/nowhere", 404, []string{"No such page"}},
	} {
		r := do(t, http.MethodGet, srv.URL+tt.path, nil)
		if r.status != tt.status {
			t.Errorf("GET %s: %d, want %d", tt.path, r.status, tt.status)
		}
		for _, w := range tt.want {
			if !strings.Contains(r.body, w) {
				t.Errorf("GET %s lacks %q", tt.path, w)
			}
		}
		if strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
				t.Errorf("GET %s: CSP %q", tt.path, csp)
			}
			// Offline: nothing is loaded from another origin.
			if m := regexp.MustCompile(`(src|href)="(https?:)?//`).FindString(r.body); m != "" {
				t.Errorf("GET %s loads %s from elsewhere", tt.path, m)
			}
		}
	}
	// A failed run offers a retry, a revive and a delete only.
	if r := do(t, http.MethodGet, srv.URL+"/runs/saga-1", nil); strings.Count(r.body, `id="action-`) != 3 || !strings.Contains(r.body, `id="action-retry"`) ||
		!strings.Contains(r.body, `id="action-revive"`) || !strings.Contains(r.body, `id="action-delete"`) {
		t.Errorf("a failed run offers other actions than retry, revive and delete")
	}
}

func TestActions(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)

	// Looking at the confirmation page changes nothing.
	do(t, http.MethodGet, srv.URL+"/runs/stuck-1/cancel", nil)
	if st := status(t, e, stuckRun); st != flow.StatusSuspended {
		t.Fatalf("GET of the confirmation page changed the run: %s", st)
	}

	// Cross-origin browser requests are refused.
	for _, h := range []map[string]string{
		{"Origin": "http://evil.example"},
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site", "Origin": "http://sub.example"},
	} {
		if r := do(t, http.MethodPost, srv.URL+"/runs/stuck-1/cancel", h); r.status != http.StatusForbidden || !strings.Contains(r.body, "Cross-origin request refused") {
			t.Errorf("cross-origin POST %v: %d", h, r.status)
		}
	}
	if st := status(t, e, stuckRun); st != flow.StatusSuspended {
		t.Fatalf("a cross-origin POST changed the run: %s", st)
	}

	// A wrong state is a conflict, and changes nothing.
	if r := do(t, http.MethodPost, srv.URL+"/runs/saga-1/resume", map[string]string{"Sec-Fetch-Site": "same-origin"}); r.status != http.StatusConflict || !strings.Contains(r.body, "not suspended") {
		t.Errorf("resume of a failed run: %d %s", r.status, r.body)
	}
	if r := do(t, http.MethodPost, srv.URL+"/runs/nope/cancel", nil); r.status != http.StatusNotFound {
		t.Errorf("cancel of an unknown run: %d", r.status)
	}

	// Same origin: done, and redirected to the run with a message.
	r := do(t, http.MethodPost, srv.URL+"/runs/stuck-1/skip", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": srv.URL})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/runs/stuck-1?done=skip" {
		t.Fatalf("skip: %d %s", r.status, r.header.Get("Location"))
	}
	if st := status(t, e, stuckRun); st != flow.StatusCompensating {
		t.Errorf("after skip: %s", st)
	}
	if r := do(t, http.MethodGet, srv.URL+"/runs/stuck-1?done=skip", nil); !strings.Contains(r.body, `class="flash"`) {
		t.Errorf("no message after the action")
	}

	r = do(t, http.MethodPost, srv.URL+"/runs/pending-1/cancel", nil) // curl: no browser headers
	if r.status != http.StatusSeeOther {
		t.Errorf("cancel: %d", r.status)
	}
	info, err := e.Inspect(context.Background(), pendingRun)
	if err != nil || !info.CancelRequested {
		t.Errorf("after cancel: %+v %v", info, err)
	}
	if r := do(t, http.MethodGet, srv.URL+"/runs/pending-1", nil); strings.Contains(r.body, `id="action-cancel"`) {
		t.Errorf("cancel is offered again after it was requested")
	}
}

func TestReadOnly(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), &Options{ReadOnly: true})
	if r := do(t, http.MethodGet, srv.URL+"/runs/stuck-1", nil); strings.Contains(r.body, `id="action-`) || !strings.Contains(r.body, "read-only") {
		t.Errorf("read-only run page offers actions, or lacks the badge")
	}
	if r := do(t, http.MethodGet, srv.URL+"/suspended", nil); strings.Contains(r.body, `/resume"`) {
		t.Errorf("read-only suspended page offers actions")
	}
	if r := do(t, http.MethodGet, srv.URL+"/runs/stuck-1/resume", nil); r.status != http.StatusForbidden {
		t.Errorf("read-only confirmation page: %d", r.status)
	}
	for _, a := range []string{"resume", "skip", "cancel", "retry"} {
		if r := do(t, http.MethodPost, srv.URL+"/runs/stuck-1/"+a, map[string]string{"Sec-Fetch-Site": "same-origin"}); r.status != http.StatusForbidden {
			t.Errorf("read-only POST %s: %d", a, r.status)
		}
	}
	if st := status(t, e, stuckRun); st != flow.StatusSuspended {
		t.Errorf("read-only dashboard changed the run: %s", st)
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	e, err := flowsqlite.Open(context.Background(), fixtureDB(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	defer srv.Close()
	if r := do(t, http.MethodGet, srv.URL+"/healthz", nil); r.status != http.StatusOK || r.body != "ok\n" {
		t.Errorf("healthz: %d %q", r.status, r.body)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if r := do(t, http.MethodGet, srv.URL+"/healthz", nil); r.status != http.StatusServiceUnavailable || !strings.HasPrefix(r.body, "unhealthy: ") {
		t.Errorf("healthz of a closed database: %d %q", r.status, r.body)
	}
	if r := do(t, http.MethodGet, srv.URL+"/metrics", nil); r.status != http.StatusOK || !strings.Contains(r.body, "flowlite_up 0\n") {
		t.Errorf("metrics of a closed database: %d\n%s", r.status, r.body)
	}
}

// sample returns the value of the metric line that starts with series.
func sample(t *testing.T, body, series string) float64 {
	t.Helper()
	for line := range strings.Lines(body) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	t.Fatalf("no %s in\n%s", series, body)
	return 0
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// A worker engine works and stops; the dashboard's engine, which runs
	// nothing, shows what the worker reported, added to what the engine
	// that built the fixture reported.
	e, err := flowsqlite.Open(ctx, path, &flow.Config{PollInterval: 5 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	reports, err := e.Reports(ctx)
	if err != nil || len(reports) != 1 {
		t.Fatalf("reports of the fixture: %+v, %v", reports, err)
	}
	fx := reports[0].Metrics
	flow.Register(e, fixture.DoneWorkflow)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	run, err := flow.Start(ctx, e, fixture.DoneWorkflow, fixture.Order{Item: "pen"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	observer, err := flowsqlite.Open(ctx, path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer observer.Close()
	if _, err := e.Checkpoint(ctx, flowsqlite.CheckpointPassive); err != nil {
		t.Fatal(err)
	}
	d, err := New(observer, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	defer srv.Close()

	r := do(t, http.MethodGet, srv.URL+"/metrics", nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" {
		t.Fatalf("metrics: %d %s", r.status, r.header.Get("Content-Type"))
	}
	body := r.body
	// The overview shows the worker's report and checkpoint too.
	if page := do(t, http.MethodGet, srv.URL+"/", nil).body; strings.Count(page, "data-engine=") != 0 || !strings.Contains(page, "2 stopped engines not shown") {
		t.Errorf("overview lists stopped engines by default:\n%s", page)
	}
	if page := do(t, http.MethodGet, srv.URL+"/?engines=all", nil).body; strings.Count(page, "data-engine=") != 2 ||
		!regexp.MustCompile(`id="last-checkpoint">just now \(PASSIVE of [0-9.]+ [KM]?i?B, by <code>[^<]+</code>\)</dd>`).MatchString(page) {
		t.Errorf("overview lacks the engines or the worker's checkpoint:\n%s", page)
	}
	for series, want := range map[string]float64{
		`flowlite_up`:                                                     1,
		`flowlite_runs{status="completed"}`:                               2,
		`flowlite_runs{status="suspended"}`:                               1,
		`flowlite_runs{status="pending"}`:                                 1,
		`flowlite_engines`:                                                2,
		`flowlite_runs_started_total`:                                     float64(fx.RunsStarted + 1),
		`flowlite_runs_finished_total{status="completed"}`:                float64(fx.RunsFinished[flow.StatusCompleted] + 1),
		`flowlite_attempt_duration_seconds_count{kind="step"}`:            float64(fx.AttemptSeconds["step"].Count + 2),
		`flowlite_attempt_duration_seconds_bucket{kind="step",le="+Inf"}`: float64(fx.AttemptSeconds["step"].Count + 2),
		`flowlite_claim_latency_seconds_count{queue="default"}`:           float64(fx.ClaimSeconds["default"].Count + 1),
	} {
		if got := sample(t, body, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if sample(t, body, "flowlite_database_bytes") <= 0 {
		t.Errorf("no database size")
	}
	sample(t, body, "flowlite_wal_bytes")
	if at := sample(t, body, "flowlite_last_checkpoint_timestamp_seconds"); time.Since(time.Unix(int64(at), 0)) > time.Minute {
		t.Errorf("last checkpoint at %v, want the worker's of just now", at)
	}
	// Step bodies of the fixture sleep a few ms: the histogram is cumulative.
	if sample(t, body, `flowlite_attempt_duration_seconds_bucket{kind="step",le="0.001"}`) > sample(t, body, `flowlite_attempt_duration_seconds_bucket{kind="step",le="1"}`) {
		t.Errorf("buckets are not cumulative")
	}
	// Every family is declared once, before its samples.
	declared := map[string]bool{}
	for line := range strings.Lines(body) {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			f := strings.Fields(name)[0]
			if declared[f] {
				t.Errorf("family %s declared twice", f)
			}
			declared[f] = true
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		name := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`).FindString(line)
		base := regexp.MustCompile(`_(bucket|sum|count)$`).ReplaceAllString(name, "")
		if !declared[name] && !declared[base] {
			t.Errorf("sample of an undeclared family: %s", line)
		}
	}
}

func TestTimeline(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	run := flow.RunInfo{
		ID: "r", Status: flow.StatusFailed, CreatedAt: t0, UpdatedAt: at(1000), FinishedAt: at(1000),
		Steps: []flow.StepRecord{
			{Name: "a", Status: "completed", Attempts: 1, StartedAt: at(0), FinishedAt: at(400), Compensation: "completed", CompensationAttempts: 1},
			{Name: "b", Occurrence: 0, Status: "failed", Attempts: 3, Error: "boom", StartedAt: at(400), FinishedAt: at(700), Compensation: "none"},
		},
	}
	events := []flow.Event{
		{At: at(800), Kind: flow.EventCompensationStarted, Step: "a"},
		{At: at(1000), Kind: flow.EventCompensationCompleted, Step: "a"},
	}
	tl := buildTimeline(run, events, at(5000))
	if tl.Empty || len(tl.Rows) != 2 || tl.Total != "1s" {
		t.Fatalf("timeline: %+v", tl)
	}
	plotW := tlWidth - tlLabelW - tlRight
	a, b := tl.Rows[0], tl.Rows[1]
	if len(a.Bars) != 2 || len(b.Bars) != 1 {
		t.Fatalf("bars: %+v / %+v", a.Bars, b.Bars)
	}
	if got := a.Bars[0]; got.X != tlLabelW || got.W != plotW*4/10 || got.Class != "step-completed" || got.Text != "400ms" {
		t.Errorf("step a: %+v", got)
	}
	if got := a.Bars[1]; got.X != tlLabelW+plotW*8/10 || got.W != plotW*2/10 || got.Class != "comp-completed" || !strings.Contains(got.Text, "200ms") {
		t.Errorf("compensation of a: %+v", got)
	}
	if got := b.Bars[0]; got.Class != "step-failed" || !strings.Contains(got.Title, "3 attempt(s)") || !strings.Contains(got.Title, "boom") {
		t.Errorf("step b: %+v", got)
	}
	if len(tl.Axis) != 5 || tl.Axis[4].Label != "+1s" || tl.Axis[4].X != tlLabelW+plotW {
		t.Errorf("axis: %+v", tl.Axis)
	}

	// A running step runs to now.
	run.Status, run.FinishedAt = flow.StatusRunning, time.Time{}
	run.Steps[1].FinishedAt, run.Steps[1].Status = time.Time{}, "running"
	tl = buildTimeline(run, nil, at(2000))
	if got := tl.Rows[1].Bars[0]; got.X+got.W != tlLabelW+plotW || !strings.Contains(got.Text, "(running)") {
		t.Errorf("running step: %+v", got)
	}
	if tl := buildTimeline(flow.RunInfo{}, nil, t0); !tl.Empty {
		t.Errorf("a run without steps draws %+v", tl)
	}
}

func TestJobPages(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)
	ctx := context.Background()
	sameOrigin := map[string]string{"Sec-Fetch-Site": "same-origin"}

	for _, tt := range []struct {
		path string
		want []string
	}{
		{"/", []string{`data-queue="batch"`, `data-queue="default"`, `href="/queues/batch/pause"`, `href="/dead?queue=default">1</a>`}},
		{"/dead", []string{`data-run="saga-1"`, "card declined", `href="/runs/saga-1/retry"`, `id="purge-all"`}},
		{"/dead?workflow=nope", []string{"No dead letters match."}},
		{"/dead/requeue?queue=default", []string{"<strong>1</strong> dead letter(s) match in queue <code>default</code>", `name="queue" value="default"`}},
		{"/dead/purge", []string{"cannot be undone"}},
		{"/runs/saga-1/retry", []string{"Retry this failed run?", "card declined"}},
		{"/queues/batch/pause", []string{`action="/queues/batch/pause"`}},
	} {
		r := do(t, http.MethodGet, srv.URL+tt.path, nil)
		if r.status != http.StatusOK {
			t.Errorf("GET %s: %d", tt.path, r.status)
		}
		for _, w := range tt.want {
			if !strings.Contains(r.body, w) {
				t.Errorf("GET %s lacks %q", tt.path, w)
			}
		}
	}
	if r := do(t, http.MethodGet, srv.URL+"/queues/batch/drain", nil); r.status != http.StatusNotFound {
		t.Errorf("unknown queue operation: %d", r.status)
	}

	// Pause and resume a queue.
	if r := do(t, http.MethodPost, srv.URL+"/queues/batch/pause", sameOrigin); r.status != http.StatusSeeOther {
		t.Fatalf("pause: %d", r.status)
	}
	if r := do(t, http.MethodGet, srv.URL+"/", nil); !strings.Contains(r.body, `href="/queues/batch/resume"`) {
		t.Errorf("a paused queue offers no resume")
	}
	stats, err := e.QueueStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range stats {
		if q.Queue == "batch" && !q.Paused {
			t.Errorf("batch not paused")
		}
	}
	if r := do(t, http.MethodPost, srv.URL+"/queues/batch/resume", map[string]string{"Origin": "http://evil.example"}); r.status != http.StatusForbidden {
		t.Errorf("cross-origin resume: %d", r.status)
	}

	// Retry a dead letter: redirected to the new run.
	r := do(t, http.MethodPost, srv.URL+"/runs/saga-1/retry", sameOrigin)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/runs/saga-1%2Frequeue-1?done=retry" {
		t.Fatalf("retry: %d %s", r.status, r.header.Get("Location"))
	}
	if r := do(t, http.MethodGet, srv.URL+"/runs/saga-1%2Frequeue-1?done=retry", nil); r.status != http.StatusOK || !strings.Contains(r.body, "Requeued: this is the new run.") {
		t.Errorf("new run page: %d", r.status)
	}
	if r := do(t, http.MethodPost, srv.URL+"/runs/saga-1/retry", sameOrigin); r.status != http.StatusConflict {
		t.Errorf("second retry: %d", r.status)
	}
	if r := do(t, http.MethodPost, srv.URL+"/runs/done-1/retry", sameOrigin); r.status != http.StatusConflict {
		t.Errorf("retry of a completed run: %d", r.status)
	}

	// Bulk purge of what matches the filter.
	if r := do(t, http.MethodGet, srv.URL+"/dead", nil); !strings.Contains(r.body, "No dead letters.") {
		t.Errorf("dead letters left after retry")
	}
	r = do(t, http.MethodPost, srv.URL+"/dead/purge", sameOrigin)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/dead?done=purge&n=0" {
		t.Errorf("purge: %d %s", r.status, r.header.Get("Location"))
	}
}

func TestBulkRequeue(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/dead/requeue", strings.NewReader("workflow=pay_order&queue=default"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/dead?queue=default&workflow=pay_order&done=requeue&n=1" {
		t.Errorf("bulk requeue: %d %s", resp.StatusCode, loc)
	}
	info, err := e.Inspect(context.Background(), sagaRun)
	if err != nil || info.RequeuedAs == "" {
		t.Errorf("after bulk requeue: %+v, %v", info.RequeuedAs, err)
	}
	if r := do(t, http.MethodGet, srv.URL+"/dead?queue=default&workflow=pay_order&done=requeue&n=1", nil); !strings.Contains(r.body, "Requeued 1 dead letter(s).") {
		t.Errorf("no message after the bulk requeue")
	}
}

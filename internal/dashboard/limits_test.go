package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// The overview shows each limited queue's limits, their use and the runs
// they hold back; a held run's page says which limit holds it, and shows
// its concurrency key; /metrics has the limit gauges.
func TestQueueLimits(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	srv, _ := server(t, path, nil)
	if page := do(t, http.MethodGet, srv.URL+"/", nil).body; strings.Contains(page, `id="queue-limits"`) {
		t.Errorf("overview shows queue limits without any")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e, err := flowsqlite.Open(ctx, path, &flow.Config{PollInterval: 5 * time.Millisecond, Queues: map[string]flow.QueueConfig{"limited": {Concurrency: 4}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	started, release := make(chan struct{}, 2), make(chan struct{})
	job := flow.Job[int]{Name: "blocker", Queue: "limited", Handler: func(ctx context.Context, _ int) error {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}}
	flow.RegisterJob(e, job)
	if err := e.SetQueueLimits(ctx, "limited", flow.QueueLimits{Concurrency: 1, Keys: []flow.KeyLimit{{Prefix: "tenant:", Concurrency: 3, Weight: 2}}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(release)
		if err := e.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	if _, err := flow.Enqueue(ctx, e, job, 1, &flow.EnqueueOptions{RunID: "first", ConcurrencyKey: "tenant:a"}); err != nil {
		t.Fatal(err)
	}
	<-started
	if _, err := flow.Enqueue(ctx, e, job, 2, &flow.EnqueueOptions{RunID: "second", ConcurrencyKey: "tenant:b"}); err != nil {
		t.Fatal(err)
	}

	page := do(t, http.MethodGet, srv.URL+"/", nil).body
	row := page[strings.Index(page, `data-limit="limited"`):]
	row = row[:strings.Index(row, "</tr>")]
	for _, want := range []string{`<td class="num">1</td>`, "tenant:*: 3 running, weight 2", `<span class="badge paused">1</span>`} {
		if !strings.Contains(row, want) {
			t.Errorf("limits row lacks %q:\n%s", want, row)
		}
	}
	run := do(t, http.MethodGet, srv.URL+"/runs/second", nil).body
	if !strings.Contains(run, `id="run-concurrency-key"><code>tenant:b</code>`) {
		t.Errorf("run page lacks the concurrency key")
	}
	if i := strings.Index(run, `id="run-held-by"`); i < 0 || !strings.Contains(run[i:], "held by the global limit of queue limited") {
		t.Errorf("run page lacks why the run is held back:\n%s", run)
	}
	if run := do(t, http.MethodGet, srv.URL+"/runs/first", nil).body; strings.Contains(run, `id="run-held-by"`) {
		t.Errorf("a running run's page says it is held back")
	}
	body := do(t, http.MethodGet, srv.URL+"/metrics", nil).body
	for series, want := range map[string]float64{
		`flowlite_queue_limit_concurrency{queue="limited"}`: 1,
		`flowlite_queue_limit_running{queue="limited"}`:     1,
		`flowlite_queue_limit_held_back{queue="limited"}`:   1,
		`flowlite_queue_limit_started{queue="limited"}`:     0,
	} {
		if got := sample(t, body, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// The limits form sets a queue's limits, refuses bad input naming it
// without changing anything, and clears them; a read-only dashboard
// refuses it.
func TestQueueLimitsForm(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	srv, e := server(t, path, nil)
	ctx := context.Background()
	limitsOf := func() flow.QueueLimits {
		uses, err := e.QueueLimits(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range uses {
			if u.Queue == "batch" {
				return u.Limits
			}
		}
		return flow.QueueLimits{}
	}
	if r := do(t, http.MethodGet, srv.URL+"/", nil); !strings.Contains(r.body, `href="/queues/batch/limits"`) {
		t.Errorf("overview offers no limits form")
	}
	r := postForm(t, srv.URL+"/queues/batch/limits", url.Values{"concurrency": {"4"}, "rate": {"10/1s"}, "key_concurrency": {"2"},
		"fair": {"1"}, "keys": {"tenant:big=8,weight=3,rate=5/1m\r\ntenant:small=1\r\n"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("set limits: %d %s", r.status, r.body)
	}
	want := flow.QueueLimits{Concurrency: 4, KeyConcurrency: 2, Rate: flow.RateLimit{Limit: 10, Period: time.Second}, Fair: true,
		Keys: []flow.KeyLimit{{Prefix: "tenant:big", Concurrency: 8, Weight: 3, Rate: flow.RateLimit{Limit: 5, Period: time.Minute}}, {Prefix: "tenant:small", Concurrency: 1}}}
	if got := limitsOf(); !reflect.DeepEqual(got, want) {
		t.Errorf("limits after the form: %+v, want %+v", got, want)
	}
	form := do(t, http.MethodGet, srv.URL+"/queues/batch/limits", nil).body
	for _, w := range []string{`name="concurrency" value="4"`, `name="rate" value="10/1s"`, `checked`, "tenant:big=8,weight=3,rate=5/1m0s\ntenant:small=1"} {
		if !strings.Contains(form, w) {
			t.Errorf("limits form lacks %q:\n%s", w, form)
		}
	}
	for _, tt := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"concurrency": {"many"}}, `concurrency &#34;many&#34;`},
		{url.Values{"rate": {"10"}}, `rate &#34;10&#34;`},
		{url.Values{"key_rate": {"1/0s"}}, `key_rate: rate &#34;1/0s&#34;`},
		{url.Values{"keys": {"tenant"}}, "no concurrency"},
		{url.Values{"keys": {"t=1,weight=-1"}}, "weight"},
	} {
		r := postForm(t, srv.URL+"/queues/batch/limits", tt.form)
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, tt.want) {
			t.Errorf("POST %v: %d, want 400 naming %q:\n%s", tt.form, r.status, tt.want, r.body)
		}
	}
	if got := limitsOf(); !reflect.DeepEqual(got, want) {
		t.Errorf("a refused form changed the limits: %+v", got)
	}
	if r := postForm(t, srv.URL+"/queues/batch/limits", url.Values{"clear": {"1"}, "concurrency": {"3"}}); r.status != http.StatusSeeOther {
		t.Fatalf("clear: %d", r.status)
	}
	if got := limitsOf(); !got.IsZero() {
		t.Errorf("limits after clear: %+v", got)
	}

	ro, _ := server(t, fixtureDB(t), &Options{ReadOnly: true})
	if r := do(t, http.MethodGet, ro.URL+"/queues/batch/limits", nil); r.status != http.StatusForbidden {
		t.Errorf("read-only limits form: %d", r.status)
	}
	if r := postForm(t, ro.URL+"/queues/batch/limits", url.Values{"concurrency": {"3"}}); r.status != http.StatusForbidden {
		t.Errorf("read-only limits POST: %d", r.status)
	}
}

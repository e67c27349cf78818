package dashboard

import (
	"context"
	"net/http"
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

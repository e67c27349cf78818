package flow_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// A queue's global concurrency holds across the files of a shard set and
// across the sets opened on them (two processes, here two sets in one
// process, each with its own stores): every file's engines work the
// queue, and no more than the limit run at once in all.
func TestShardSetGlobalConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	paths := shardPaths(t, 2)
	l := newLedger()
	job := flow.Job[limitedArgs]{Name: "export", Queue: "export", Handler: l.body(40 * time.Millisecond)}
	var sets []*flow.Engine
	for range 2 {
		cfg := testConfig()
		cfg.Queues = map[string]flow.QueueConfig{"export": {Concurrency: 4}}
		e := openShards(t, paths, cfg)
		flow.RegisterJob(e, job)
		sets = append(sets, e)
	}
	if err := sets[0].SetQueueLimits(ctx, "export", flow.QueueLimits{Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	placed := map[int]int{}
	for i := range 16 {
		id := fmt.Sprintf("export-%d", i)
		placed[sets[0].PlaceRun(id, "")]++
		if _, err := flow.Enqueue(ctx, sets[0], job, limitedArgs{N: i}, &flow.EnqueueOptions{RunID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if placed[0] == 0 || placed[1] == 0 {
		t.Fatalf("the runs are all in one file (%v): the test would not cross files", placed)
	}
	startAll(t, sets...)
	waitFinished(t, l, 16)
	if l.peak > 2 {
		t.Errorf("%d runs executed at once across the shard set, global limit 2 (per file it would allow 4)", l.peak)
	}
	if l.peak < 2 {
		t.Errorf("at most %d run executed at once: the limit of 2 was never used", l.peak)
	}
}

// A queue's rate holds across the files of a shard set.
func TestShardSetRateLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	paths := shardPaths(t, 2)
	l := newLedger()
	job := flow.Job[limitedArgs]{Name: "mail", Queue: "mail", Handler: l.body(0)}
	cfg := testConfig()
	cfg.Queues = map[string]flow.QueueConfig{"mail": {Concurrency: 10}}
	e := openShards(t, paths, cfg)
	flow.RegisterJob(e, job)
	period := 300 * time.Millisecond
	if err := e.SetQueueLimits(ctx, "mail", flow.QueueLimits{Rate: flow.RateLimit{Limit: 4, Period: period}}); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		if _, err := flow.Enqueue(ctx, e, job, limitedArgs{N: i}, &flow.EnqueueOptions{RunID: fmt.Sprintf("mail-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	startAll(t, e)
	waitFinished(t, l, 12)
	// Counted at the claims, which the rate limits, as the runs' records
	// have them: a handler's own start lags its claim by however long the
	// process takes to get to it (much longer under -race), so claims a
	// period apart could begin within one window.
	window := period * 2 / 3 // see TestRateLimit
	claims := newLedger()
	for i := range 12 {
		info, err := e.Inspect(ctx, fmt.Sprintf("mail-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		claims.starts = append(claims.starts, info.StartedAt)
	}
	if got := claims.maxInWindow(window); got > 4 {
		t.Errorf("%d runs were claimed within %s across the shard set, rate 4 per %s", got, window, period)
	}
	if took := time.Since(began); took < 2*period-50*time.Millisecond {
		t.Errorf("12 runs at 4 per %s took %s, under the two periods they need", period, took)
	}
}

// A step's rate limiter holds across the files of a shard set.
func TestShardSetStepRateLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger()
	period := 300 * time.Millisecond
	limit := flow.StepRateLimit{Name: "sms-gateway", Rate: flow.RateLimit{Limit: 3, Period: period}}
	job := flow.Job[limitedArgs]{Name: "sms", RateLimit: &limit, Handler: l.body(0)}
	e := openShards(t, shardPaths(t, 2), nil)
	flow.RegisterJob(e, job)
	placed := map[int]int{}
	for i := range 9 {
		id := fmt.Sprintf("sms-%d", i)
		placed[e.PlaceRun(id, "")]++
		if _, err := flow.Enqueue(ctx, e, job, limitedArgs{N: i}, &flow.EnqueueOptions{RunID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if placed[0] == 0 || placed[1] == 0 {
		t.Fatalf("the runs are all in one file (%v): the test would not cross files", placed)
	}
	began := time.Now()
	startAll(t, e)
	waitFinished(t, l, 9)
	window := period * 2 / 3 // see TestRateLimit
	if got := l.maxInWindow(window); got > 3 {
		t.Errorf("%d attempts began within %s across the shard set, limiter 3 per %s", got, window, period)
	}
	if took := time.Since(began); took < 2*period-50*time.Millisecond {
		t.Errorf("9 attempts at 3 per %s took %s, under the two periods they need", period, took)
	}
}

package flow_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/clock"
)

// A timeout counts from the run's first claim: a run that waited in its
// queue longer than its timeout still runs, where one with the same
// absolute Deadline is cancelled before it ran. The claim turns the
// timeout into the deadline.
func TestTimeoutCountsFromDequeue(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewManual(t0)
	cfg := testConfig()
	cfg.Clock = clk
	e := openEngine(t, dbPath(t), cfg)
	var ran atomic.Int64
	wf := flow.Workflow[int, int]{Name: "queued", Run: func(wc flow.Context, n int) (int, error) {
		return flow.Do(wc, flow.Step[int, int]{Name: "work", Run: func(_ context.Context, n int) (int, error) {
			ran.Add(1)
			return n * 2, nil
		}}, n)
	}}
	flow.Register(e, wf)
	ctx := waitCtx(t)
	timed, err := flow.Start(ctx, e, wf, 1, &flow.StartOptions{RunID: "timed", Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	absolute, err := flow.Start(ctx, e, wf, 2, &flow.StartOptions{RunID: "absolute", Deadline: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := e.Inspect(ctx, "timed"); err != nil || info.Timeout != time.Hour || !info.Deadline.IsZero() {
		t.Fatalf("queued run: timeout %s, deadline %s, %v; want 1h and no deadline yet", info.Timeout, info.Deadline, err)
	}
	// Both wait in the queue for two hours before an engine works it.
	clk.Advance(2 * time.Hour)
	startEngine(t, e)
	if out, err := timed.Result(ctx); err != nil || out != 2 {
		t.Fatalf("timed run = %d, %v; want it to run, its hour counting from its claim", out, err)
	}
	var cancelled *flow.CancelledError
	if _, err := absolute.Result(ctx); !errors.As(err, &cancelled) {
		t.Fatalf("run past its absolute deadline = %v, want cancelled", err)
	}
	info, err := e.Inspect(ctx, "timed")
	if err != nil {
		t.Fatal(err)
	}
	if want := info.StartedAt.Add(time.Hour); !info.Deadline.Equal(want) || !info.StartedAt.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("after its claim at %s: deadline %s, want %s", info.StartedAt, info.Deadline, want)
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("step ran %d times, want once (for the timed run only)", n)
	}
	var detail string
	for _, ev := range historyOf(t, e, "timed") {
		if ev.Kind == flow.EventRunStarted {
			detail = ev.Detail
		}
	}
	if !strings.Contains(detail, "timeout 1h0m0s from its first claim") {
		t.Errorf("run_started detail %q does not record the timeout", detail)
	}
}

// Once claimed, the timeout is a deadline like any: a run that takes
// longer is cancelled, its step seeing the cancellation through its
// context. An earlier Deadline wins over the timeout.
func TestTimeoutCancelsARunThatTakesTooLong(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	block := flow.Step[int, int]{Name: "block", Run: func(ctx context.Context, n int) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}}
	wf := flow.Workflow[int, int]{Name: "slow", Run: func(wc flow.Context, n int) (int, error) {
		return flow.Do(wc, block, n)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	ctx := waitCtx(t)
	r, err := flow.Start(ctx, e, wf, 1, &flow.StartOptions{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var cancelled *flow.CancelledError
	if _, err := r.Result(ctx); !errors.As(err, &cancelled) {
		t.Fatalf("Result = %v, want cancelled by its timeout", err)
	}
	info, err := e.Inspect(ctx, r.ID())
	if err != nil {
		t.Fatal(err)
	}
	if want := info.StartedAt.Add(200 * time.Millisecond); !info.Deadline.Equal(want) {
		t.Errorf("deadline %s, want the first claim %s plus 200ms", info.Deadline, info.StartedAt)
	}

	early := time.Now().Add(time.Hour)
	r2, err := flow.Start(ctx, e, wf, 2, &flow.StartOptions{Timeout: 24 * time.Hour, Deadline: early})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run claimed", func() bool {
		info, err := e.Inspect(ctx, r2.ID())
		return err == nil && !info.StartedAt.IsZero()
	})
	if info, _ := e.Inspect(ctx, r2.ID()); !info.Deadline.Equal(early.Truncate(time.Millisecond)) {
		t.Errorf("deadline %s, want the earlier Deadline %s", info.Deadline, early)
	}
	if err := e.Cancel(ctx, r2.ID()); err != nil {
		t.Fatal(err)
	}
}

// A bad timeout fails the start and records nothing.
func TestTimeoutBadInput(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	wf := flow.Workflow[int, int]{Name: "noop", Run: func(wc flow.Context, n int) (int, error) { return n, nil }}
	flow.Register(e, wf)
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "negative timeout -1s"},
		{500 * time.Microsecond, "timeout 500µs is under the millisecond"},
	} {
		if _, err := flow.Start(context.Background(), e, wf, 1, &flow.StartOptions{Timeout: tc.d}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start with timeout %s = %v, want %q", tc.d, err, tc.want)
		}
	}
	if n := totalRuns(t, e); n != 0 {
		t.Fatalf("%d runs recorded, want none", n)
	}
}

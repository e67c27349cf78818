package flow_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/clock"
)

// First returns the branch that succeeds first and cancels the others with
// ErrLostRace; a replay returns the recorded winner and runs nothing new.
func TestFirstRecordsTheWinnerAndCancelsTheOthers(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig()
	cfg.Clock = clk
	e := openEngine(t, dbPath(t), cfg)

	var mu sync.Mutex
	var ran []string
	var loserCause error
	record := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, name)
	}
	slowStarted := make(chan struct{})
	fast := flow.Step[int, string]{Name: "fast", Run: func(_ context.Context, n int) (string, error) {
		record("fast")
		<-slowStarted // so that there is a loser to cancel
		return "fast wins", nil
	}}
	slow := flow.Step[int, string]{Name: "slow", Run: func(ctx context.Context, n int) (string, error) {
		record("slow")
		close(slowStarted)
		<-ctx.Done()
		mu.Lock()
		loserCause = context.Cause(ctx)
		mu.Unlock()
		return "", ctx.Err()
	}}
	wf := flow.Workflow[int, string]{Name: "racer", Run: func(wc flow.Context, n int) (string, error) {
		v, i, err := flow.First(wc,
			func(wc flow.Context) (string, error) { return flow.Do(wc, slow, n) },
			func(wc flow.Context) (string, error) { return flow.Do(wc, fast, n) },
		)
		if err != nil {
			return "", err
		}
		if err := flow.Sleep(wc, time.Hour); err != nil { // forces a replay of First
			return "", err
		}
		return v + " as branch " + string(rune('0'+i)), nil
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to sleep", func() bool {
		info, _ := e.Inspect(ctx, run.ID())
		return info.Status == flow.StatusWaiting
	})
	clk.Advance(time.Hour)
	e.WakeAll()
	got, err := run.Result(ctx)
	if err != nil || got != "fast wins as branch 1" {
		t.Fatalf("result = %q, %v", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(ran)
	if !slices.Equal(ran, []string{"fast", "slow"}) {
		t.Fatalf("step bodies ran %v, want each once (the replay runs nothing)", ran)
	}
	if !errors.Is(loserCause, flow.ErrLostRace) {
		t.Fatalf("loser's context cause = %v, want ErrLostRace", loserCause)
	}
	if n := countKind(t, e, run.ID(), flow.EventRaceWon); n != 1 {
		t.Fatalf("%d race_won events, want 1", n)
	}
}

// When the workflow fails after a race, the steps both the winner and a
// loser completed are compensated.
func TestFirstCompensatesLosersCompletedSteps(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var mu sync.Mutex
	var undone []string
	undoable := func(name string, block bool) flow.Step[int, int] {
		return flow.Step[int, int]{
			Name: name,
			Run: func(ctx context.Context, n int) (int, error) {
				if block {
					<-ctx.Done()
					return 0, ctx.Err()
				}
				return n, nil
			},
			Compensate: func(context.Context, int, int) error {
				mu.Lock()
				defer mu.Unlock()
				undone = append(undone, name)
				return nil
			},
		}
	}
	loserFirst, loserBlock := undoable("loser_first", false), undoable("loser_block", true)
	winner := undoable("winner", false)
	gate := make(chan struct{})
	wf := flow.Workflow[int, int]{Name: "race_then_fail", Run: func(wc flow.Context, n int) (int, error) {
		_, _, err := flow.First(wc,
			func(wc flow.Context) (int, error) {
				v, err := flow.Do(wc, loserFirst, n)
				if err != nil {
					return 0, err
				}
				close(gate)
				return flow.Do(wc, loserBlock, v)
			},
			func(wc flow.Context) (int, error) {
				<-gate
				return flow.Do(wc, winner, n)
			},
		)
		if err != nil {
			return 0, err
		}
		return 0, flow.Permanent(errors.New("fail after the race"))
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("result err = %v, want rolled back", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(undone, []string{"winner", "loser_first"}) {
		t.Fatalf("compensated %v, want [winner loser_first] (reverse completion order; the interrupted step is not undone)", undone)
	}
}

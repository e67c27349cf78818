package engine

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// errConnLost stands for a write whose connection broke mid-transaction
// (a database server restarted, or its session ended): the transaction
// rolled back, and the next one may well succeed.
var errConnLost = errors.New("connection lost")

// failOnce is a store whose write transactions fail once, at the first
// call of the Tx method named method after the test armed it.
type failOnce struct {
	store.Store
	method string
	armed  atomic.Bool
	fired  atomic.Bool
}

func (f *failOnce) Write(ctx context.Context, fn func(store.Tx) error) error {
	return f.Store.Write(ctx, func(tx store.Tx) error { return fn(failTx{Tx: tx, f: f}) })
}

func (f *failOnce) fire(method string) bool {
	return method == f.method && f.armed.Load() && f.fired.CompareAndSwap(false, true)
}

type failTx struct {
	store.Tx
	f *failOnce
}

func (t failTx) RunStartCompensating(ctx context.Context, l store.Lease, errMsg string, now int64) error {
	if t.f.fire("RunStartCompensating") {
		return errConnLost
	}
	return t.Tx.RunStartCompensating(ctx, l, errMsg, now)
}

func (t failTx) StepCompensationBegin(ctx context.Context, key store.StepKey) (int, error) {
	if t.f.fire("StepCompensationBegin") {
		return 0, errConnLost
	}
	return t.Tx.StepCompensationBegin(ctx, key)
}

func (t failTx) StepCompensationEnd(ctx context.Context, key store.StepKey, state store.CompensationState, errMsg string) error {
	if t.f.fire("StepCompensationEnd") {
		return errConnLost
	}
	return t.Tx.StepCompensationEnd(ctx, key, state, errMsg)
}

// A write of the unwind that fails for a reason that may pass (moving the
// run to compensating, beginning a compensation, recording one) gives the
// run back at once, as a failed write of the forward path does, so that it
// resumes from its last record: it must not stay leased to this engine,
// its heartbeat stopped, until the lease expires (an hour here).
func TestUnwindWriteFailureGivesTheRunBack(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		method string
		comps  int32 // calls of the compensation: a recorded one is not repeated
	}{
		{"RunStartCompensating", 1},
		{"StepCompensationBegin", 1},
		{"StepCompensationEnd", 2}, // it ran, its record was lost: it runs again
	} {
		t.Run(c.method, func(t *testing.T) {
			t.Parallel()
			s := openTestStore(t)
			f := &failOnce{Store: s, method: c.method}
			e, err := New(f, Config{
				PollInterval: 10 * time.Millisecond, LeaseTimeout: time.Hour,
				Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			var comps atomic.Int32
			once := flowtype.RetryPolicy{MaxAttempts: 1}
			err = e.Register(Workflow{Key: jobKey, Run: func(rc *RunContext, _ []byte) ([]byte, error) {
				_, err := rc.Step(Step{Name: "reserve", Input: []byte(`{}`), Retry: once, CompensateRetry: once,
					Run: func(context.Context, *sql.Tx) ([]byte, error) { return []byte(`1`), nil },
					Compensate: func(context.Context, []byte, []byte) error {
						comps.Add(1)
						return nil
					},
				})
				if err != nil {
					return nil, err
				}
				_, err = rc.Step(Step{Name: "charge", Input: []byte(`{}`), Retry: once, Run: func(context.Context, *sql.Tx) ([]byte, error) {
					f.armed.Store(true)
					return nil, &flowtype.PermanentError{Err: errors.New("card declined")}
				}})
				return nil, err
			}})
			if err != nil {
				t.Fatal(err)
			}
			startTestEngine(t, e)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if _, err := e.StartRun(ctx, StartParams{ID: "r", Workflow: jobKey, Input: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			run, err := e.Wait(ctx, "r")
			if err != nil {
				t.Fatalf("run not settled (status %s) 10s after its unwind's write failed: %v", run.Status, err)
			}
			if !f.fired.Load() {
				t.Fatalf("%s was never called", c.method)
			}
			if run.Status != flowtype.StatusFailed {
				t.Fatalf("run %s (%s), want failed (rolled back)", run.Status, run.Reason)
			}
			if n := comps.Load(); n != c.comps {
				t.Errorf("compensation ran %d times, want %d", n, c.comps)
			}
		})
	}
}

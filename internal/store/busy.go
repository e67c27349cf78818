package store

import (
	"context"
	"errors"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// RetryBusy calls write until it returns anything but flowtype.ErrBusy,
// waiting between calls with backoff (10ms, doubling up to 1s); it gives up
// when ctx ends, returning the last flowtype.ErrBusy. onBusy, when not nil,
// is told of each flowtype.ErrBusy before the wait.
//
// A flowtype.ErrBusy says another connection, usually another process, held
// the database's write lock for all of the busy timeout. With several
// processes writing constantly, the lock is seldom free when a waiting
// connection looks (SQLite's busy handler sleeps up to 100ms between looks),
// so one write can wait out the timeout while the others commit: a write
// failed so is not at fault and may be tried again, and every write that
// must not fail under contention (the engine's, a change-feed consumer's
// acknowledgement) is retried here, within its caller's bound. write must be
// safe to call again after a flowtype.ErrBusy: nothing of a failed Write was
// written.
func RetryBusy(ctx context.Context, write func() error, onBusy func(error)) error {
	backoff := 10 * time.Millisecond
	for {
		err := write()
		if !errors.Is(err, flowtype.ErrBusy) || ctx.Err() != nil {
			return err
		}
		if onBusy != nil {
			onBusy(err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// writeTests check what the engine relies on from Store.Write (see the
// contract in the store package doc): a unit of work commits whole or not
// at all, and one caller's failure never spoils another's. Exercise runs
// them with the others.
func writeTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"WriteRollsBackOnError", testWriteRollsBackOnError},
		{"WriteRollsBackOnPanic", testWriteRollsBackOnPanic},
		{"WriteCancelledContext", testWriteCancelledContext},
		{"WritesConcurrentIsolated", testWritesConcurrentIsolated},
	}
}

var errAbort = errors.New("abort on purpose")

func testWriteRollsBackOnError(t *testing.T, s store.Store) {
	ctx := t.Context()
	keep := runWithStatus(t, s, "keep", flowtype.StatusPending)
	err := s.Write(ctx, func(tx store.Tx) error {
		if ok, err := tx.RunInsert(ctx, newRun("new")); err != nil || !ok {
			return fmt.Errorf("insert: %v, %w", ok, err)
		}
		k := store.StepKey{RunID: "new", Name: "s"}
		if _, err := tx.StepBegin(ctx, store.StepBeginParams{Key: k, Input: []byte(`{}`), Now: base}); err != nil {
			return err
		}
		if err := tx.StepComplete(ctx, store.StepCompleteParams{Key: k, Output: []byte(`1`), Now: base}); err != nil {
			return err
		}
		if err := tx.EventAppend(ctx, store.Event{RunID: "new", At: base, Kind: "run.started"}); err != nil {
			return err
		}
		if err := tx.WorkflowRegister(ctx, order1, base); err != nil {
			return err
		}
		runs, err := tx.RunClaim(ctx, store.RunClaimParams{
			Queue: "queue-keep", Known: []flowtype.WorkflowKey{order1}, Owner: "w", Max: 1, Now: base, LeaseExpiresAt: base + 1,
		})
		if err != nil || len(runs) != 1 {
			return fmt.Errorf("claim keep: %v, %w", ids(runs), err)
		}
		// The transaction reads its own writes; other readers do not.
		if r, err := tx.RunGet(ctx, "new"); err != nil || r.ID != "new" {
			return fmt.Errorf("tx does not see its own insert: %v", err)
		}
		if _, err := s.Reader().RunGet(ctx, "new"); !errors.Is(err, flowtype.ErrRunNotFound) {
			t.Errorf("reader sees an uncommitted run: error %v, want ErrRunNotFound", err)
		}
		return errAbort
	})
	if !errors.Is(err, errAbort) {
		t.Fatalf("Write returned %v, want the error of fn", err)
	}
	if _, err := s.Reader().RunGet(ctx, "new"); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("run inserted by a failed write exists: error %v", err)
	}
	if st := steps(t, s, "new"); len(st) != 0 {
		t.Errorf("steps of a failed write exist: %v", st)
	}
	if ev, err := s.Reader().EventList(ctx, "new"); err != nil || len(ev) != 0 {
		t.Errorf("events of a failed write exist: %v, %v", ev, err)
	}
	if wf, err := s.Reader().WorkflowList(ctx); err != nil || len(wf) != 0 {
		t.Errorf("workflows of a failed write exist: %v, %v", wf, err)
	}
	checkRun(t, s, keep)
}

func testWriteRollsBackOnPanic(t *testing.T, s store.Store) {
	ctx := t.Context()
	func() {
		defer func() {
			if r := recover(); r != errAbort {
				t.Errorf("recovered %v, want the panic of fn to propagate", r)
			}
		}()
		_ = s.Write(ctx, func(tx store.Tx) error {
			if _, err := tx.RunInsert(ctx, newRun("new")); err != nil {
				return err
			}
			panic(errAbort)
		})
	}()
	// The store is still usable, and the write left nothing behind.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := s.Write(wctx, func(tx store.Tx) error {
		_, err := tx.RunInsert(wctx, newRun("after"))
		return err
	})
	if err != nil {
		t.Fatalf("write after a panicking write: %v", err)
	}
	if _, err := s.Reader().RunGet(ctx, "new"); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("run inserted by a panicking write exists: error %v", err)
	}
	get(t, s, "after")
}

func testWriteCancelledContext(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	err := s.Write(ctx, func(tx store.Tx) error {
		called = true
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Write with a cancelled context: error %v, want context.Canceled", err)
	}
	if called {
		t.Error("Write with a cancelled context ran fn")
	}
}

// testWritesConcurrentIsolated checks that concurrent writers, which an
// adapter may commit together, see only their own outcome: a failing or
// panicking writer leaves nothing behind and takes no other writer down.
func testWritesConcurrentIsolated(t *testing.T, s store.Store) {
	const writers = 30
	g, ctx := errgroup.WithContext(t.Context())
	for i := range writers {
		g.Go(func() (err error) {
			id := fmt.Sprintf("r%02d", i)
			if i%5 == 4 {
				defer func() {
					if r := recover(); r != errAbort {
						err = fmt.Errorf("writer %s: recovered %v, want its own panic", id, r)
					}
				}()
			}
			werr := s.Write(ctx, func(tx store.Tx) error {
				ok, err := tx.RunInsert(ctx, newRun(id))
				if err != nil || !ok {
					return fmt.Errorf("insert %s: %v, %w", id, ok, err)
				}
				if err := tx.EventAppend(ctx, store.Event{RunID: id, At: base, Kind: "run.started"}); err != nil {
					return err
				}
				switch i % 5 {
				case 3:
					return errAbort
				case 4:
					panic(errAbort)
				}
				return nil
			})
			switch {
			case i%5 == 3 && !errors.Is(werr, errAbort):
				return fmt.Errorf("failing writer %s got %v, want its own error", id, werr)
			case i%5 < 3 && werr != nil:
				return fmt.Errorf("writer %s: %w", id, werr)
			case i%5 == 4:
				return fmt.Errorf("panicking writer %s returned %v instead of panicking", id, werr)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for i := range writers {
		id := fmt.Sprintf("r%02d", i)
		_, err := s.Reader().RunGet(t.Context(), id)
		events, eerr := s.Reader().EventList(t.Context(), id)
		if eerr != nil {
			t.Fatal(eerr)
		}
		if i%5 < 3 {
			if err != nil || len(events) != 1 {
				t.Errorf("committed writer %s: run error %v, %d events; want the run and 1 event", id, err, len(events))
			}
		} else if !errors.Is(err, flowtype.ErrRunNotFound) || len(events) != 0 {
			t.Errorf("failed writer %s: run error %v, %d events; want nothing left", id, err, len(events))
		}
	}
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Debounce and throttle of starts (flowtype.Debounce). A debounced start
// is one Write: DebounceLock of the key (PostgreSQL's stand-in for
// SQLite's write lock), then the key's record, then the run it names, read
// for update. While that run is pending and was never claimed the start
// merges into it: under DebounceReplace RunDebounceReplace gives it the
// start's input and a due time Window from now, bounded by the run's first
// start plus its MaxDelay, in one guarded statement; under DebounceDrop
// nothing of it changes. Either way an EventRunDebounced records it and
// the start returns the run as existing. Otherwise (no record, or a run
// claimed, cancelled or deleted since) the start inserts a new run due
// Window from now, as any start does, and makes it the key's run.

// MaxDebounceKey is the longest debounce key a start may carry, in bytes.
const MaxDebounceKey = 256

// startDebounced starts p, which has a debounce, as described above.
func (e *Engine) startDebounced(ctx context.Context, p *StartParams) (Started, error) {
	if err := validDebounce(p); err != nil {
		return Started{}, err
	}
	if err := e.prepareStart(p); err != nil {
		return Started{}, err
	}
	d := *p.Debounce
	var st Started
	err := e.store.Write(ctx, func(tx store.Tx) error {
		st = Started{}
		now := e.nowMs()
		if err := tx.DebounceLock(ctx, p.Workflow.Name, d.Key); err != nil {
			return fmt.Errorf("start %s: %w", p.Workflow, err)
		}
		rec, found, err := tx.DebounceGet(ctx, p.Workflow.Name, d.Key)
		if err != nil {
			return fmt.Errorf("start %s: %w", p.Workflow, err)
		}
		if found {
			merged, ok, err := e.mergeDebounced(ctx, tx, p, rec, now)
			if err != nil || ok {
				st = Started{Run: merged, Existing: true}
				return err
			}
		}
		// A new debounced run, due a window from now.
		q := *p
		q.RunAt = time.UnixMilli(now + d.Window.Milliseconds())
		if st, err = e.insertRun(ctx, tx, &q); err != nil {
			return err
		}
		if st.Existing {
			// Only a taken ID could do it, and a debounced start has a
			// fresh one: a collision of random IDs.
			return fmt.Errorf("start %s: %w: run ID %s is taken", p.Workflow, flowtype.ErrConflict, q.ID)
		}
		return tx.DebouncePut(ctx, store.DebouncePutParams{Workflow: p.Workflow.Name, Key: d.Key, DebounceRecord: store.DebounceRecord{
			RunID: q.ID, FirstAt: now, MaxDelay: d.MaxDelay.Milliseconds(),
		}})
	})
	if err != nil {
		return Started{}, err
	}
	if !st.Existing {
		e.metrics.runStarted()
	}
	// A new run is due a window from now (a wake then, as for any delayed
	// start), and a replaced one may have become due at once, at its max
	// delay. A due time moved later arms nothing: a stream of starts would
	// arm a timer each, and the claim loop's poll finds the run anyway.
	due := time.Duration(st.Run.RunAt-e.nowMs()) * time.Millisecond
	if !st.Existing || due <= 0 {
		e.wakeAfter(st.Run.Queue, due)
	}
	return st, nil
}

// mergeDebounced merges the start p into rec's run when that run still
// takes starts (pending, never claimed, no cancellation requested), and
// reports whether it did, with the run as it is now.
func (e *Engine) mergeDebounced(ctx context.Context, tx store.Tx, p *StartParams, rec store.DebounceRecord, now int64) (store.Run, bool, error) {
	run, err := tx.RunGetForUpdate(ctx, rec.RunID)
	if err != nil {
		if errors.Is(err, flowtype.ErrRunNotFound) {
			return store.Run{}, false, nil // deleted: the key is free
		}
		return store.Run{}, false, fmt.Errorf("start %s: debounced run %s: %w", p.Workflow, rec.RunID, err)
	}
	if !takesStarts(run) {
		return store.Run{}, false, nil
	}
	d := p.Debounce
	var detail string
	switch d.Mode {
	case flowtype.DebounceDrop:
		detail = fmt.Sprintf("start dropped (debounce key %q, drop): due at %s as before", d.Key, msTime(run.RunAt))
	default:
		due := now + d.Window.Milliseconds()
		bounded := ""
		if rec.MaxDelay > 0 && due > rec.FirstAt+rec.MaxDelay {
			due = rec.FirstAt + rec.MaxDelay
			bounded = fmt.Sprintf(", its max delay %s after its first start", time.Duration(rec.MaxDelay)*time.Millisecond)
		}
		replaced, err := tx.RunDebounceReplace(ctx, store.RunDebounceReplaceParams{ID: run.ID, Input: p.Input, RunAt: due, Now: now})
		if err != nil {
			return store.Run{}, false, fmt.Errorf("start %s: %w", p.Workflow, err)
		}
		if !replaced {
			// The row was read for update, so only a store that does not
			// hold it could get here; a new run is then the safe answer.
			return store.Run{}, false, nil
		}
		detail = fmt.Sprintf("input replaced (debounce key %q): due at %s, was %s%s", d.Key, msTime(due), msTime(run.RunAt), bounded)
		run.Input, run.RunAt, run.UpdatedAt = p.Input, due, now
	}
	if err := tx.EventAppend(ctx, store.Event{RunID: run.ID, At: now, Kind: flowtype.EventRunDebounced, Detail: detail}); err != nil {
		return store.Run{}, false, err
	}
	return run, true, nil
}

// takesStarts reports whether a debounced run still merges starts: it is
// pending and was never claimed, and no cancellation was asked of it.
func takesStarts(r store.Run) bool {
	return r.Status == flowtype.StatusPending && r.Fence == 0 && r.LeaseOwner == "" && !r.CancelRequested
}

// msTime formats a time in Unix milliseconds for an event's detail.
func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

// debounceDetail is what the run_started event of a debounced run says of
// its debounce.
func debounceDetail(p *StartParams) string {
	d := p.Debounce
	if d == nil {
		return ""
	}
	s := fmt.Sprintf(", debounce key %q (%s, window %s", d.Key, d.Mode, d.Window)
	if d.MaxDelay > 0 {
		s += ", max delay " + d.MaxDelay.String()
	}
	return s + ")"
}

// validDebounce checks p's debounce, before anything is written.
func validDebounce(p *StartParams) error {
	d := p.Debounce
	if d == nil {
		return nil
	}
	switch {
	case d.Key == "":
		return fmt.Errorf("start %s: a debounce needs a key", p.Workflow)
	case len(d.Key) > MaxDebounceKey:
		return fmt.Errorf("start %s: debounce key of %d bytes, over the %d allowed", p.Workflow, len(d.Key), MaxDebounceKey)
	case d.Window < 0:
		return fmt.Errorf("start %s: negative debounce window %s", p.Workflow, d.Window)
	case d.Window < time.Millisecond:
		return fmt.Errorf("start %s: debounce window %s is under the millisecond the engine counts in", p.Workflow, d.Window)
	case d.MaxDelay < 0:
		return fmt.Errorf("start %s: negative debounce max delay %s", p.Workflow, d.MaxDelay)
	case d.MaxDelay > 0 && d.MaxDelay < d.Window:
		return fmt.Errorf("start %s: debounce max delay %s is shorter than its window %s", p.Workflow, d.MaxDelay, d.Window)
	case d.Mode != flowtype.DebounceReplace && d.Mode != flowtype.DebounceDrop:
		return fmt.Errorf("start %s: unknown debounce mode %d", p.Workflow, int(d.Mode))
	case p.UniqueKey != "":
		return fmt.Errorf("start %s: a debounce excludes a unique key (the debounce key already makes one pending run)", p.Workflow)
	case !p.RunAt.IsZero():
		return fmt.Errorf("start %s: a debounce excludes RunAt and Delay (the debounce sets the due time)", p.Workflow)
	case p.ParentID != "":
		return fmt.Errorf("start %s: a child cannot be debounced", p.Workflow)
	case p.IDReuse != flowtype.ReuseNever:
		return fmt.Errorf("start %s: a debounce excludes ID reuse", p.Workflow)
	}
	return nil
}

// errDebounceHere is the error of a debounce given to a start that cannot
// debounce: in the caller's transaction or in a batch.
func errDebounceHere(p *StartParams, where string) error {
	return fmt.Errorf("start %s: a debounce cannot be given to a start %s (it needs a transaction of its own to merge starts)", p.Workflow, where)
}

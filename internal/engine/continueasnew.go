package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Continue-as-new (Temporal's ContinueAsNew): a body that would record
// calls without end (a loop that sleeps and reacts for months) returns a
// *ContinueAsNewError instead of its output. The engine then ends the
// run's current execution and starts the next one under the same run ID,
// in one write transaction fenced by the lease (store.RunContinue): the
// run gets the new input (and version), its step records are deleted, the
// signals they received are retired, its execution number goes up, and it
// is due at once. A crash before that commit replays the old execution,
// which deterministically returns ContinueAsNew again; after it, the new
// execution starts from an empty history. Replays, history limits and
// compensations therefore see only the current execution's calls.

// ContinueAsNewError is what a workflow body returns to continue as new
// with Input (encoded), on workflow version Version (zero: the run's own).
type ContinueAsNewError struct {
	Input   []byte
	Version int
}

func (c *ContinueAsNewError) Error() string {
	return "continue as new (not an error: the run goes on as a new execution)"
}

// childExecutionScope is what a child's default ID holds of its parent's
// execution: nothing in the first, so that IDs stay as they were, and
// "exec<N>/" in a later one, whose call keys start over.
func childExecutionScope(execution int) string {
	if execution <= 1 {
		return ""
	}
	return fmt.Sprintf("exec%d/", execution)
}

// continueAsNew ends the execution and starts the next one (see above).
// The version must be registered here; otherwise the run is suspended,
// since no claim could pick it up.
func (x *execution) continueAsNew(rc *RunContext, c *ContinueAsNewError) {
	version := x.run.Version
	if c.Version != 0 {
		version = c.Version
	}
	if _, ok := x.e.Lookup(flowtype.WorkflowKey{Name: x.run.Workflow, Version: version}); !ok {
		x.suspend(fmt.Sprintf("continue as new on version %d of %s: %v", version, x.run.Workflow, flowtype.ErrUnknownWorkflow))
		return
	}
	if err := x.e.CheckPayload("input of the next execution of "+x.run.Workflow, c.Input); err != nil {
		x.startUnwind(rc, err.Error())
		return
	}
	rc.st.mu.Lock()
	calls := make([]store.Step, 0, len(rc.st.records))
	for _, s := range rc.st.records {
		calls = append(calls, s)
	}
	rc.st.mu.Unlock()
	err := x.writeRetried("continue as new", func(ctx context.Context, tx store.Tx, now int64) error {
		// The deferred checkpoints committed first (writeTx); their
		// records go with the rest.
		if err := x.undoBegun(ctx, tx, "the run continued as new first", now); err != nil {
			return err
		}
		n, err := tx.RunContinue(ctx, x.lease, store.RunContinueParams{Input: c.Input, Version: version, Now: now})
		if err != nil {
			return err
		}
		detail := fmt.Sprintf("execution %d began; execution %d recorded %d calls", n, n-1, len(calls))
		if version != x.run.Version {
			detail += fmt.Sprintf(", on version %d", version)
		}
		detail += DiscardedMarker + listJSON(calls)
		return x.event(ctx, tx, now, store.Event{Kind: flowtype.EventContinuedAsNew, Occurrence: n, Detail: detail})
	})
	if err != nil {
		if !errors.Is(err, store.ErrLeaseLost) {
			x.gaveUp("continue as new", err)
		}
		return
	}
	x.e.log.Debug("run continued as new", "run", x.run.ID, "workflow", x.run.Workflow)
	x.e.Wake(x.run.Queue)
}

package engine

import (
	"fmt"
	"time"

	"github.com/flowlite/flowlite/internal/store"
)

// Start options a run keeps for its whole life (store.StartOptions).
//
// Timeout. A deadline is absolute: a run still queued when it passes is
// cancelled before it ran. A timeout counts from the run's first claim
// instead (DBOS's WithTimeout on queues): the claim that first leases the
// run sets its deadline to the claim's time plus the timeout, or keeps an
// earlier deadline the run had, in the claim's own statement, so every
// later execution, rescue, release and child sees it as the deadline it
// is. A run that is rescued and claimed again keeps the deadline of its
// first claim.
//
// Detached children. A child is cancelled with its parent: when the parent
// is cancelled, or fails and unwinds, RunCancelChildren requests the
// cancellation of its unfinished children. A detached child is left out
// (DBOS's WithoutCancel): it runs to its own end, and inherits no deadline
// from its parent either. It is still its parent's child: the parent can
// await it, and it is listed with the parent's ID.

// startOptions returns the options of p the store records.
func (p *StartParams) startOptions() store.StartOptions {
	return store.StartOptions{Timeout: p.Timeout.Milliseconds(), Detached: p.Detached, Context: p.Context}
}

// validStartOptions checks p's start options, before anything is written.
func validStartOptions(p *StartParams) error {
	switch {
	case p.Timeout < 0:
		return fmt.Errorf("start %s: negative timeout %s", p.Workflow, p.Timeout)
	case p.Timeout > 0 && p.Timeout < time.Millisecond:
		return fmt.Errorf("start %s: timeout %s is under the millisecond the engine counts in", p.Workflow, p.Timeout)
	case p.Detached && p.ParentID == "":
		return fmt.Errorf("start %s: only a child can be detached (from its parent)", p.Workflow)
	}
	return nil
}

// startOptionsDetail is what the run_started event says of p's start
// options.
func startOptionsDetail(p *StartParams) string {
	var d string
	if p.Timeout > 0 {
		d += ", timeout " + p.Timeout.String() + " from its first claim"
	}
	if p.Detached {
		d += ", detached from parent " + p.ParentID + " (its cancellation does not reach this run)"
	}
	return d + valuesDetail(p)
}

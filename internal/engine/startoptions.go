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

// startOptions returns the options of p the store records.
func (p *StartParams) startOptions() store.StartOptions {
	return store.StartOptions{Timeout: p.Timeout.Milliseconds()}
}

// validStartOptions checks p's start options, before anything is written.
func validStartOptions(p *StartParams) error {
	switch {
	case p.Timeout < 0:
		return fmt.Errorf("start %s: negative timeout %s", p.Workflow, p.Timeout)
	case p.Timeout > 0 && p.Timeout < time.Millisecond:
		return fmt.Errorf("start %s: timeout %s is under the millisecond the engine counts in", p.Workflow, p.Timeout)
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
	return d
}

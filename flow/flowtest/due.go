package flowtest

import (
	"context"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// maxRuns bounds the runs Await reads to find the next due time: a test
// has a few; the bound only keeps a runaway test from reading forever.
const maxRuns = 10_000

// neverYear: a wait that only an event ends (a signal without timeout, a
// child) is recorded as due at the end of time, far beyond this year.
const neverYear = 3000

// advanceWhenIdle moves the clock to the next time something in the Env's
// database is due, if the engine is idle at the current time: no run in
// flight, none ready to be claimed, no schedule slot due. Every durable wait
// ends at a due time (a delayed start, a retry backoff, a sleep, a receive
// timeout, a run's deadline, a cron slot), and a wait for a child ends when
// the child, which has its own due times, finishes; so jumping to the
// earliest due time of every unfinished run and schedule, not just the
// awaited run, lets each wait pass at once, in the order real time would.
//
// Waiting for idleness first means a run never sees the clock jump in the
// middle of an execution, so a deadline is never passed by a jump while
// the run it cancels is working. When nothing is due at any time (a
// receive with no timeout whose signal nobody sends), the clock stays.
//
// The clock moves for the awaited run, runID, alone: once the read that
// finds the engine idle finds that run settled (finished, or suspended),
// the clock stays where the run settled. An engine is idle too once the
// awaited run completed, and jumping then to another run's due time would
// show the caller a clock that ran past the run it awaited (a run due in a
// minute would have completed "at +59 s"). Each jump goes to the earliest
// due time, which the awaited run's own next due time bounds, so the
// clock never passes the time the awaited run needs. A run not started
// yet (AwaitSlot's, before its slot) moves it as far as anything is due.
func (env *Env) advanceWhenIdle(runID string) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if next, idle := env.nextDue(ctx, runID); idle && !next.IsZero() {
		env.advanceTo(next)
	}
}

// nextDue reports whether the engine is idle at the clock's time and the
// earliest later time something is due (zero: none). A settled awaited
// run (runID) reports busy, so that the clock stays. A read error reports
// busy: Await then simply waits and looks again.
func (env *Env) nextDue(ctx context.Context, runID string) (next time.Time, idle bool) {
	now := env.Now()
	later := func(t time.Time) {
		if t.After(now) && t.Year() < neverYear && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	// Schedules first, runs second: a slot firing in between inserts its run
	// and moves the schedule on in one transaction, so one of the two reads
	// sees it due.
	schedules, err := env.Engine.Schedules(ctx)
	if err != nil {
		return time.Time{}, false
	}
	for _, s := range schedules {
		if s.Paused || s.NextAt.IsZero() {
			continue
		}
		if !s.NextAt.After(now) {
			return time.Time{}, false // the scheduler is about to start it
		}
		later(s.NextAt)
	}
	// One read, so that every run is seen in one consistent state.
	runs, err := env.Engine.ListRuns(ctx, flow.RunFilter{Limit: maxRuns})
	if err != nil {
		return time.Time{}, false
	}
	var ready []flow.RunInfo
	for _, r := range runs {
		if r.ID == runID && (r.Status.Finished() || r.Status == flow.StatusSuspended) {
			return time.Time{}, false // settled: Await returns it at this time
		}
		switch r.Status {
		case flow.StatusRunning:
			return time.Time{}, false
		case flow.StatusPending, flow.StatusWaiting, flow.StatusCompensating:
		default: // finished, or suspended until someone decides
			continue
		}
		if !r.RunAt.After(now) {
			ready = append(ready, r)
		}
		later(r.RunAt)
		later(r.Deadline)
	}
	if len(ready) > 0 && env.claimable(ctx, ready) {
		return time.Time{}, false
	}
	return next, true
}

// claimable reports whether the engine will claim one of the ready runs:
// a run in a queue it does not work, a paused queue, or of a workflow
// version it lacks stays ready forever and must not hold the clock still.
func (env *Env) claimable(ctx context.Context, ready []flow.RunInfo) bool {
	var inWorked []flow.RunInfo
	for _, r := range ready {
		if env.queues[r.Queue] {
			inWorked = append(inWorked, r)
		}
	}
	if len(inWorked) == 0 {
		return false
	}
	stats, err := env.Engine.QueueStats(ctx)
	if err != nil {
		return true
	}
	paused := make(map[string]bool)
	for _, q := range stats {
		paused[q.Queue] = q.Paused
	}
	waiting, err := env.Engine.Waiting(ctx)
	if err != nil {
		return true
	}
	type version struct {
		name string
		v    int
	}
	lacking := make(map[version]bool, len(waiting))
	for _, w := range waiting {
		lacking[version{w.Workflow, w.Version}] = true
	}
	for _, r := range inWorked {
		if !paused[r.Queue] && !lacking[version{r.Workflow, r.Version}] {
			return true
		}
	}
	return false
}

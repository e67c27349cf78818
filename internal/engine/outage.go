package engine

import (
	"errors"
	"sync"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// The background loops (claimers, scheduler, rescuer) poll the database
// every few hundred milliseconds. While it is unavailable (a server
// restarting, a failover: flowtype.ErrUnavailable) each poll fails the same
// way, and logging every failure at error level would bury the log in a
// routine outage. Instead each loop logs a warning when its polls start
// failing so, the later failures at debug level, and once at info level
// when a poll succeeds again, with how long the outage lasted for it.
// Every other error is logged as it comes.

// outages holds, per loop (its log message, with the queue of a claimer),
// when its polls found the database unavailable first.
type outages struct {
	mu    sync.Mutex
	since map[string]time.Time
}

// loopFailed logs the failure of a poll of loop: msg, with args.
func (e *Engine) loopFailed(loop, msg string, err error, args ...any) {
	args = append(args, "err", err)
	if !errors.Is(err, flowtype.ErrUnavailable) {
		e.log.Error(msg, args...)
		return
	}
	e.outage.mu.Lock()
	_, known := e.outage.since[loop]
	if !known {
		e.outage.since[loop] = time.Now()
	}
	e.outage.mu.Unlock()
	if known {
		e.log.Debug(msg, args...)
		return
	}
	e.log.Warn(msg+": database unavailable; retrying every poll until it is back", args...)
}

// loopOK records that a poll of loop succeeded, and logs the end of its
// outage if it had one.
func (e *Engine) loopOK(loop string, args ...any) {
	e.outage.mu.Lock()
	since, was := e.outage.since[loop]
	if was {
		delete(e.outage.since, loop)
	}
	e.outage.mu.Unlock()
	if was {
		e.log.Info(loop+": database available again", append(args, "unavailable_for", time.Since(since).Round(time.Millisecond))...)
	}
}

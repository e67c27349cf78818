package pgstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/flowlite/flowlite/dbgen/pgdb"
)

// A failover to a standby that replicated asynchronously loses the old
// primary's last commits, claims among them. On the new primary, a run that
// an engine still executes, leased on the old one, then looks unleased (or
// leased by an expired, older claim), and another engine would claim or
// rescue it and run its step a second time, at the same time: the first
// engine learns that its lease is gone only at its next heartbeat, and not
// at all while it cannot reach the new server.
//
// So every claim and rescue goes through serverGate, and their statements
// take only runs created at or after a bound, held_before, and nothing
// unless the server answering is the one the store last observed
// (server_started, pg_postmaster_start_time()):
//
//   - The store looks at which server answers once every serverRecheck.
//     When it is another (a promoted standby, or the same server
//     restarted), or the first this store sees, it records it in the
//     schema (server_epoch, 00013_server_epoch.sql) with when it was first
//     seen, by this engine or another.
//   - For Options.ServerChangeHold after that moment (the engines' lease,
//     flowpg sets it), runs created before it (plus serverHoldSkew for the
//     engines' clocks) are neither claimed nor rescued: by then the
//     execution that held such a run on the old server has either heard
//     from the new one that its lease is gone, or gone as long without
//     renewing it as any engine whose lease the others may take. Runs
//     created on the new server are claimed at once.
//   - A claim that reaches a new server before the store looked claims
//     nothing (its statement checks server_started), rather than claiming
//     without the hold; the next look records the server.
//
// A synchronous standby loses no claim, and a restart none either, but
// neither is told apart from an asynchronous failover: both hold the runs
// in flight or waiting for a lease's length too, as the price of not
// running a step twice at once.

const (
	// serverRecheck is how often the store looks at which server answers.
	serverRecheck = time.Second
	// serverHoldSkew widens the hold to runs created shortly after the
	// change was seen, for engines whose clocks run behind the observer's.
	serverHoldSkew = time.Second
)

// serverWatch is the store's view of the server it claims on.
type serverWatch struct {
	hold time.Duration // Options.ServerChangeHold

	mu        sync.Mutex
	started   int64     // pg_postmaster_start_time() in µs; 0 before the first look
	seenAt    int64     // when an engine first saw it (Unix ms); 0 for the schema's first server
	checkedAt time.Time // of the last look
}

// serverGate returns the server_started and held_before of a claim or
// rescue at now (Unix ms) through q, looking at which server answers when
// it is time to (lookAtServer).
func (s *Store) serverGate(ctx context.Context, q *pgdb.Queries, now int64) (server, heldBefore int64, err error) {
	if s.server.due() {
		if err := s.lookAtServer(ctx, q, now); err != nil {
			return 0, 0, err
		}
	}
	server, heldBefore = s.server.params(now)
	return server, heldBefore, nil
}

// lookAtServer reads which server answers through q and, when it is not
// the one the store knows, records it in the schema (ServerObserve). q runs
// at READ COMMITTED (a Write's transaction, or alone's): concurrent first
// looks of a new server upsert one row, which a stronger isolation would
// fail with serialization errors.
func (s *Store) lookAtServer(ctx context.Context, q *pgdb.Queries, now int64) error {
	w := &s.server
	w.mu.Lock()
	known := w.started
	w.mu.Unlock()
	cur, err := q.ServerStarted(ctx)
	if err != nil {
		return fmt.Errorf("read which server answers: %w", err)
	}
	seenAt := int64(-1) // unchanged
	if cur != known {
		row, err := q.ServerObserve(ctx, now)
		if err != nil {
			return fmt.Errorf("record the server that answers: %w", err)
		}
		cur, seenAt = row.ServerStarted, row.SeenAt
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.started, w.checkedAt = cur, time.Now()
	if seenAt >= 0 {
		w.seenAt = seenAt
	}
	return nil
}

// due reports whether it is time to look at which server answers.
func (w *serverWatch) due() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started == 0 || time.Since(w.checkedAt) >= serverRecheck
}

// params returns the server_started and held_before of a claim or rescue
// at now.
func (w *serverWatch) params(now int64) (server, heldBefore int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started, w.heldBefore(now)
}

// heldBefore returns the creation time before which runs are held at now:
// 0 outside a hold. w.mu must be held.
func (w *serverWatch) heldBefore(now int64) int64 {
	if w.seenAt == 0 || now >= w.seenAt+w.hold.Milliseconds() {
		return 0
	}
	return w.seenAt + serverHoldSkew.Milliseconds()
}

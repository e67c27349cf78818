package pgstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

var _ store.Claimer = (*Store)(nil)

// claimGrace is how long a claim statement goes on after its caller's
// context ended (an engine stopping). A statement cancelled midway may
// have committed without its caller learning which runs it leased, which
// would then wait for their leases to expire; so it is left to finish,
// which takes milliseconds, and cancelled only if the server does not
// answer within the grace (a network cut), so that stopping stays bounded.
const claimGrace = time.Second

// ClaimAndBegin makes a claim one statement, RunClaimAndBegin, in a
// transaction of its own (alone): one round trip where a claim in Write
// takes six. A connection the pool holds that turns out dead is skipped
// and the statement sent again on another (deadconn.go): a statement a
// dead session received was not run. The change feed is told of the
// events it appended, as after a Write.
func (s *Store) ClaimAndBegin(ctx context.Context, p store.ClaimAndBeginParams) ([]store.ClaimedRun, error) {
	return s.claimAlone(ctx, p, false)
}

var _ store.LimitedClaimer = (*Store)(nil)

// ClaimAndBeginLimited is ClaimAndBegin for a queue whose only limit is a
// global concurrency, in one statement, RunClaimAndBeginLimited: it claims
// nothing when another claim of the queue committed between its snapshot
// and its lock, or the queue's limits changed (store.LimitedClaimer).
func (s *Store) ClaimAndBeginLimited(ctx context.Context, p store.ClaimAndBeginParams) ([]store.ClaimedRun, error) {
	return s.claimAlone(ctx, p, true)
}

func (s *Store) claimAlone(ctx context.Context, p store.ClaimAndBeginParams, limited bool) ([]store.ClaimedRun, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, flowtype.ErrClosed
	}
	firstSteps, err := firstStepsJSON(p.FirstSteps)
	if err != nil {
		return nil, fmt.Errorf("claim runs of queue %s: %w", p.Queue, err)
	}
	stmtCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(s.claimGrace, cancel) })
	defer stopGrace()
	// The look at the server is part of the claim, under its grace. It
	// takes a connection of its own, once a second at most: a claim alone
	// is one round trip otherwise.
	if s.server.due() {
		if err := s.alone(stmtCtx, func(q *pgdb.Queries) error { return s.lookAtServer(stmtCtx, q, p.Now) }); err != nil {
			return nil, fmt.Errorf("claim runs of queue %s: %w", p.Queue, interpretError(stmtCtx, err))
		}
	}
	server, heldBefore := s.server.params(p.Now)
	args := pgdb.RunClaimAndBeginParams{
		Queue: p.Queue, Now: p.Now, Known: knownJSON(p.Known), MaxRuns: int64(p.Max),
		Owner: p.Owner, LeaseExpiresAt: p.LeaseExpiresAt, FirstSteps: firstSteps,
		ServerStarted: server, HeldBefore: heldBefore,
	}
	var rows []pgdb.RunClaimAndBeginRow
	if limited {
		err = s.alone(stmtCtx, func(q *pgdb.Queries) error {
			limitedRows, err := q.RunClaimAndBeginLimited(stmtCtx, pgdb.RunClaimAndBeginLimitedParams{
				Queue: args.Queue, Now: args.Now, Known: args.Known, MaxRuns: args.MaxRuns,
				Owner: args.Owner, LeaseExpiresAt: args.LeaseExpiresAt, FirstSteps: args.FirstSteps,
				ServerStarted: args.ServerStarted, HeldBefore: args.HeldBefore,
			})
			for _, r := range limitedRows {
				rows = append(rows, pgdb.RunClaimAndBeginRow(r))
			}
			return err
		})
	} else {
		rows, err = s.claimAndBegin(stmtCtx, args)
	}
	if err != nil {
		return nil, fmt.Errorf("claim runs of queue %s: %w", p.Queue, interpretError(stmtCtx, err))
	}
	claimed := claimedFromRows(rows)
	if len(rows) > 0 { // it appended their events
		s.afterCommit(nil, true)
	}
	return claimed, nil
}

var _ store.TxClaimer = (*tx)(nil)

// ClaimAndBeginIn is ClaimAndBegin's statement inside the transaction, for
// a claim of a limited queue (store.TxClaimer); the events it appended
// reach the change feed once the transaction commits.
func (t *tx) ClaimAndBeginIn(ctx context.Context, p store.ClaimAndBeginParams) ([]store.ClaimedRun, error) {
	firstSteps, err := firstStepsJSON(p.FirstSteps)
	if err != nil {
		return nil, fmt.Errorf("claim runs of queue %s: %w", p.Queue, err)
	}
	server, heldBefore, err := t.s.serverGate(ctx, t.q, p.Now)
	if err != nil {
		return nil, fmt.Errorf("claim runs of queue %s: %w", p.Queue, interpretError(ctx, err))
	}
	rows, err := t.q.RunClaimAndBegin(ctx, pgdb.RunClaimAndBeginParams{
		Queue: p.Queue, Now: p.Now, Known: knownJSON(p.Known), MaxRuns: int64(p.Max),
		Owner: p.Owner, LeaseExpiresAt: p.LeaseExpiresAt, FirstSteps: firstSteps,
		ServerStarted: server, HeldBefore: heldBefore,
	})
	if err != nil {
		return nil, fmt.Errorf("claim runs of queue %s: %w", p.Queue, interpretError(ctx, err))
	}
	if len(rows) > 0 {
		t.appended = true
	}
	return claimedFromRows(rows), nil
}

// claimAndBegin runs RunClaimAndBegin as a transaction of its own (alone).
func (s *Store) claimAndBegin(ctx context.Context, p pgdb.RunClaimAndBeginParams) (rows []pgdb.RunClaimAndBeginRow, err error) {
	err = s.alone(ctx, func(q *pgdb.Queries) error {
		rows, err = q.RunClaimAndBegin(ctx, p)
		return err
	})
	return rows, err
}

// alone runs f's one statement as a transaction of its own, on a
// connection taken as a Write takes one (writeConn: a wait bounded by the
// store's NetworkTimeout) and again on another when the one taken turns
// out dead, which the statement did not reach (deadconn.go). The
// transaction is an implicit one, a single round trip, when the pool's
// sessions default to READ COMMITTED (Open's always do); else an explicit
// one at READ COMMITTED, as on a caller's pool whose server, database or
// role defaults to REPEATABLE READ or SERIALIZABLE the statement could
// fail with a serialization error.
func (s *Store) alone(ctx context.Context, f func(q *pgdb.Queries) error) error {
	for try := 0; ; try++ {
		conn, err := s.writeConn(ctx)
		if err != nil {
			return err
		}
		err = s.aloneOn(ctx, conn, f)
		conn.Close()
		if err == nil || !retryDeadConn(ctx, s.db, err, try) {
			return err
		}
	}
}

func (s *Store) aloneOn(ctx context.Context, conn *sql.Conn, f func(q *pgdb.Queries) error) error {
	if !s.explicitTx {
		return f(pgdb.New(s.conn(conn)))
	}
	sqlTx, err := conn.BeginTx(ctx, readCommitted)
	if err != nil {
		return err
	}
	defer sqlTx.Rollback()
	if err := f(pgdb.New(s.conn(sqlTx))); err != nil {
		return err
	}
	return sqlTx.Commit()
}

// claimedFromRows returns the runs RunClaimAndBegin claimed.
func claimedFromRows(rows []pgdb.RunClaimAndBeginRow) []store.ClaimedRun {
	claimed := make([]store.ClaimedRun, len(rows))
	for i, r := range rows {
		claimed[i].Run = runFromRow(pgdb.Run{
			ID: r.ID, Seq: r.Seq, Workflow: r.Workflow, Version: r.Version, Queue: r.Queue, Priority: r.Priority,
			Status: r.Status, Input: r.Input, Output: r.Output, Error: r.Error, Reason: r.Reason,
			CancelRequested: r.CancelRequested, RunAt: r.RunAt, Deadline: r.Deadline, ParentID: r.ParentID,
			WakeSeq: r.WakeSeq, Fence: r.Fence, LeaseOwner: r.LeaseOwner, LeaseExpiresAt: r.LeaseExpiresAt,
			CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt, UniqueKey: r.UniqueKey,
			UniqueStates: r.UniqueStates, StartedAt: r.StartedAt, RequeuedFrom: r.RequeuedFrom, RequeuedAs: r.RequeuedAs,
			Timeout: r.Timeout, Detached: r.Detached, ContextValues: r.ContextValues, ConcurrencyKey: r.ConcurrencyKey,
		})
		claimed[i].Begun = r.Begun
	}
	return claimed
}

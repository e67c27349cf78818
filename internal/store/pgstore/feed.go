package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// The change feed on PostgreSQL.
//
// Event IDs come from a sequence, which hands them out in the order
// transactions insert, not the order they commit: transaction A may draw
// ID 50, B draw 51 and commit, and A commit later. A reader that delivered
// 51 and moved its cursor past it would never see 50. So the feed holds
// back every ID a transaction still in progress could fill, and delivers
// IDs only up to a final horizon: an ID F such that every ID at or below
// it is committed (and visible) or will never appear.
//
// The horizon comes from a probe, in two steps:
//
//  1. in one statement (FeedProbe), read L, the sequence's last value, and
//     then take a transaction ID P for the probe itself. Every ID at or
//     below L was drawn already, by a transaction committed, rolled back
//     or in progress; each such transaction took its transaction ID
//     before it drew (EventAppend makes sure of it, events.sql), so before
//     P was handed out, and transaction IDs are handed out in order: all
//     of them are older than P;
//  2. once a later snapshot's xmin is above P, every transaction older
//     than P has ended, and L is final.
//
// Step 2 usually holds at the probe's own check when the database is
// idle, and at the next read otherwise, as soon as the transactions that
// were in flight at the probe have committed: the horizon trails the
// newest commit by about one transaction's length. A transaction that
// stays open (in any database of the server, as xmin is server-wide) holds
// the horizon back until it ends; that is the price of never skipping an
// event, and what any reader ordered by commit would wait for too.
//
// Why the probe takes a transaction ID of its own, rather than reading the
// newest one from a snapshot: a snapshot's xmax is one past the newest
// *completed* transaction, not the newest handed out. A transaction in
// progress whose ID is newer than every completed one is in no snapshot's
// list of transactions in progress and does not hold back xmin, so a
// horizon built on xmax declared positions final that such a transaction
// still held, and a follower skipped them for good. The probe's ID is the
// one bound that cannot miss a transaction; it costs one transaction ID
// and an unflushed commit record per probe, on the readers' side only.
//
// Why not the alternatives: delivering only events whose own transaction
// ID is below xmin, but in ID order, is not enough (A above may hold a
// transaction ID newer than B's, so B's event passes the test while A's
// ID 50 is still unseen); ordering by (transaction ID, ID) instead makes
// the cursor a pair and can order two transactions of one run against
// their commit order; a counter taken under a lock at commit serializes
// every commit. The probe costs the writers nothing: one condition in
// EventAppend, evaluated once per event.
//
// A horizon holds on the server it was probed on, and only there. After a
// failover to a standby that had not received the last commits, the
// promoted standby's sequence goes on from what it had replayed, below
// IDs the old primary handed out: a horizon of the old primary would
// declare final IDs that the new one hands out again to transactions
// still in progress, and readers would skip their events for good. Its
// transaction IDs go on from the replayed ones too, so a probe's ID says
// nothing about the other server's snapshots. So the probe and the check
// name the server that answered (its postmaster's start time), and a
// different server starts the horizon over (from 0, probed again) there:
// readers wait for one probe, then read on. A restart of the same server
// starts it over too, which is not needed (nothing committed is lost) and
// costs only that wait.
type feedHorizon struct {
	mu     sync.Mutex
	final  int64      // every ID at or below it is final
	server int64      // the server final and probe hold on (0: none yet)
	probe  *feedProbe // taken, not yet known to be final
}

type feedProbe struct {
	last int64 // the sequence's last value at the probe
	xid  int64 // the probe's own transaction ID, taken after reading last
}

// on makes the horizon the one of server, starting it over when it held
// on another.
func (h *feedHorizon) on(server int64) {
	if h.server != server {
		h.server, h.final, h.probe = server, 0, nil
	}
}

var _ store.FeedNotifier = (*Store)(nil)

// wakeFeed is the kind of the wake a Write that appended events asks for:
// sent on the schema's feed channel (notify.go), not the engines'.
const wakeFeed store.WakeKind = "feed"

// FeedCommitted returns a channel closed after the next Write of this
// store that appended events commits, or when another process's does: the
// first call starts a listener on the schema's feed channel, which wakes
// this process's readers on every feed wake until the store is closed. A
// transaction the caller commits itself (WriteInTx) sends no feed wake,
// nor does a store opened with Options.NoWakes: readers poll for those.
func (s *Store) FeedCommitted() <-chan struct{} {
	ch := s.committed.Wait()
	if !s.noWakes && !s.closed.Load() {
		s.feedListen.Do(func() {
			s.feedDone.Add(1)
			go s.listenFeed()
		})
	}
	return ch
}

// listenFeed wakes the feed's readers in this process on every feed wake,
// reconnecting with backoff, until the store is closed. It wakes them
// also whenever it starts listening, as wakes sent meanwhile are lost.
func (s *Store) listenFeed() {
	defer s.feedDone.Done()
	ctx := s.closedCtx
	cfg, err := s.listenConfig(ctx)
	if err != nil {
		return // readers poll
	}
	retry := listenRetryMin
	for {
		conn, err := listenOn(ctx, cfg, s.feedChannel)
		if err == nil {
			retry = listenRetryMin
			s.committed.Notify()
			_ = receive(ctx, conn, s.listenIdle, func(string) { s.committed.Notify() })
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = conn.Close(closeCtx)
			cancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
		retry = min(2*retry, listenRetryMax)
	}
}

// finalHorizon advances the store's horizon as far as it can now and
// returns it. Concurrent readers share one probe. The probe and its check
// run on the pool, each in a transaction of its own, also when the reader
// is bound to a transaction: the probe's transaction ID must be one that
// ends, and the check needs a snapshot taken after it ended.
func (s *Store) finalHorizon(ctx context.Context) (int64, error) {
	h := &s.feed
	h.mu.Lock()
	defer h.mu.Unlock()
	q := pgdb.New(s.conn(s.db))
	if h.probe == nil {
		probe, err := q.FeedProbe(ctx)
		if err != nil {
			return 0, fmt.Errorf("probe event sequence: %w", interpretError(ctx, err))
		}
		h.on(probe.Server)
		if probe.Last <= h.final {
			return h.final, nil // nothing drawn since the last horizon
		}
		h.probe = &feedProbe{last: probe.Last, xid: probe.Xid}
	}
	snap, err := q.FeedSnapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("read snapshot: %w", interpretError(ctx, err))
	}
	if snap.Server != h.server {
		h.on(snap.Server) // the probe was another server's: probe again
		return h.final, nil
	}
	if snap.Xmin > h.probe.xid {
		h.final = max(h.final, h.probe.last)
		h.probe = nil
	}
	return h.final, nil
}

// EventFeed reads the events after after up to the final horizon.
func (r reader) EventFeed(ctx context.Context, after int64, max int) ([]store.Event, error) {
	through, err := r.s.finalHorizon(ctx)
	if err != nil {
		return nil, fmt.Errorf("read change feed after %d: %w", after, err)
	}
	if through <= after {
		return []store.Event{}, nil
	}
	rows, err := r.q.EventFeed(ctx, pgdb.EventFeedParams{After: after, Through: through, MaxEvents: int64(max)})
	if err != nil {
		return nil, fmt.Errorf("read change feed after %d: %w", after, interpretError(ctx, err))
	}
	return eventsFromRows(rows), nil
}

func (r reader) FeedPurgedThrough(ctx context.Context) (int64, error) {
	n, err := r.q.FeedPurgedThrough(ctx)
	if err != nil {
		return 0, fmt.Errorf("read change feed's purged position: %w", interpretError(ctx, err))
	}
	return n, nil
}

func (r reader) FeedLast(ctx context.Context) (int64, error) {
	n, err := r.q.FeedLast(ctx)
	if err != nil {
		return 0, fmt.Errorf("read change feed's last position: %w", interpretError(ctx, err))
	}
	return n, nil
}

func (r reader) FeedConsumerGet(ctx context.Context, name string) (store.FeedConsumer, error) {
	row, err := r.q.FeedConsumerGet(ctx, name)
	if errors.Is(err, sql.ErrNoRows) {
		return store.FeedConsumer{}, fmt.Errorf("feed consumer %s: %w", name, flowtype.ErrRunNotFound)
	}
	if err != nil {
		return store.FeedConsumer{}, fmt.Errorf("read feed consumer %s: %w", name, interpretError(ctx, err))
	}
	return feedConsumer(row), nil
}

func (r reader) FeedConsumerList(ctx context.Context) ([]store.FeedConsumer, error) {
	rows, err := r.q.FeedConsumerList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list feed consumers: %w", interpretError(ctx, err))
	}
	out := make([]store.FeedConsumer, len(rows))
	for i, row := range rows {
		out[i] = feedConsumer(row)
	}
	return out, nil
}

func (r reader) FeedConsumerMinPosition(ctx context.Context) (int64, error) {
	n, err := r.q.FeedConsumerMinPosition(ctx)
	if err != nil {
		return 0, fmt.Errorf("read feed consumers' lowest position: %w", interpretError(ctx, err))
	}
	return n, nil
}

func feedConsumer(row pgdb.FeedConsumer) store.FeedConsumer {
	return store.FeedConsumer{Name: row.Name, Position: row.Position, CreatedAt: row.CreatedAt, AckedAt: row.AckedAt}
}

func (t *tx) FeedConsumerAck(ctx context.Context, name string, position, now int64) error {
	if name == "" {
		return errors.New("acknowledge feed position: consumer name is empty")
	}
	err := t.q.FeedConsumerAck(ctx, pgdb.FeedConsumerAckParams{Name: name, Position: position, Now: now})
	if err != nil {
		return fmt.Errorf("acknowledge feed position %d of consumer %s: %w", position, name, interpretError(ctx, err))
	}
	return nil
}

func (t *tx) FeedConsumerDelete(ctx context.Context, name string) (bool, error) {
	n, err := t.q.FeedConsumerDelete(ctx, name)
	if err != nil {
		return false, fmt.Errorf("delete feed consumer %s: %w", name, interpretError(ctx, err))
	}
	return n > 0, nil
}

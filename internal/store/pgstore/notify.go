package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

var _ store.Notifier = (*Store)(nil)

// Wakes travel on one channel per schema, so that stores in different
// schemas of one database (tests, tenants) do not wake each other's
// engines. The writes that make work appear ask for them, and they are
// sent only once the write committed, never for one rolled back:
//
//   - RunInsert, RunRequeue, RunWake (a signal or a child's outcome for a
//     waiting run: the engine's SignalSend is always followed by RunWake,
//     which is the write that makes the run due), RunMakeDue,
//     RunCancelToUnwind, RunRescue, RunSetStatus to pending, and the
//     operator's RunReschedule, RunReset and RunForkInsert send a ready
//     wake for the run (with its due time, which RunReschedule may have
//     moved later);
//   - RunRequestCancel and RunCancelChildren send a cancel wake, so the
//     engine executing the run cancels it at once rather than at its next
//     heartbeat;
//   - resuming a queue (QueueSetPaused) sends a ready wake for the queue.
//
// RunRelease sends none: the engine that releases a run works its queue
// and wakes its own claimer, and a wake per step would cost every step a
// statement. A write that changed nothing sends no wake.
//
// When they are sent. PostgreSQL's NOTIFY is transactional (delivered on
// commit, dropped on rollback), but a transaction that notified holds one
// lock of the server's notification queue from its commit's start to its
// end, WAL flush included: notifying transactions commit one at a time,
// losing PostgreSQL's group commit, which cut concurrent inserts from
// about 3,600/s to 1,400/s on a 2-core machine (BenchmarkInsertWakes). So:
//
//   - in a transaction the store owns (Write), the wakes are collected and,
//     after the commit, handed to one sender (sendWakes) that sends all
//     that accumulated in one statement, an implicit transaction which
//     does not wait for its flush (WakeSend): writers never take the lock,
//     and the wake follows the commit by a round trip;
//   - in the caller's transaction (WriteInTx), whose commit the store does
//     not see, they are sent in the transaction (pg_notify), which
//     PostgreSQL delivers when the caller commits.
//
// A process that dies between a commit and its wakes loses them; so does
// a failed send. Polling finds that work, as the store.Notifier contract
// allows.

// wakeReq is a wake a write asked for: kind for the runs ids, or a ready
// wake for queue.
type wakeReq struct {
	kind  store.WakeKind
	ids   []string
	queue string
}

// wakeSendTimeout bounds one send of accumulated wakes.
const wakeSendTimeout = 10 * time.Second

// wakeSender holds the wakes committed writes asked for until the sender
// goroutine, which runs only while there are some, sends them.
type wakeSender struct {
	mu      sync.Mutex
	pending []wakeReq
	sending bool // a sendWakes goroutine runs
}

// sendAfterCommit queues the wakes of a committed Write for sending.
func (s *Store) sendAfterCommit(reqs []wakeReq) {
	if len(reqs) == 0 {
		return
	}
	s.sender.mu.Lock()
	s.sender.pending = append(s.sender.pending, reqs...)
	start := !s.sender.sending
	s.sender.sending = true
	s.sender.mu.Unlock()
	if start {
		go s.sendWakes()
	}
}

// sendWakes sends the queued wakes, all that accumulated during the
// previous send in one transaction, until none is left. It returns then,
// so an idle store runs no goroutine.
func (s *Store) sendWakes() {
	for {
		s.sender.mu.Lock()
		reqs := s.sender.pending
		s.sender.pending = nil
		if len(reqs) == 0 {
			s.sender.sending = false
			s.sender.mu.Unlock()
			return
		}
		s.sender.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), wakeSendTimeout)
		_ = s.sendWakeBatch(ctx, reqs) // wakes are hints: polling finds what a failed send announced
		cancel()
	}
}

// sendWakeBatch sends reqs, each run's and queue's once, and the change
// feed's one notification if a write appended events, with one statement
// (WakeSend) in a transaction of its own.
func (s *Store) sendWakeBatch(ctx context.Context, reqs []wakeReq) error {
	if s.closed.Load() {
		return flowtype.ErrClosed
	}
	type runWake struct {
		Kind store.WakeKind `json:"k"`
		ID   string         `json:"id"`
	}
	seen := make(map[runWake]bool)
	runs := []runWake{}
	queues := []string{}
	feed := false
	for _, r := range reqs {
		if r.kind == wakeFeed {
			feed = true // one notification for all
			continue
		}
		if r.queue != "" {
			if k := (runWake{Kind: "queue", ID: r.queue}); !seen[k] {
				seen[k] = true
				queues = append(queues, r.queue)
			}
			continue
		}
		for _, id := range r.ids {
			if k := (runWake{Kind: r.kind, ID: id}); !seen[k] {
				seen[k] = true
				runs = append(runs, k)
			}
		}
	}
	runsJSON, _ := json.Marshal(runs)     // strings only: always marshals
	queuesJSON, _ := json.Marshal(queues) // likewise
	err := pgdb.New(s.conn(s.db)).WakeSend(ctx, pgdb.WakeSendParams{
		Channel: s.channel, Runs: string(runsJSON), Queues: string(queuesJSON),
		FeedChannel: s.feedChannel, NotifyFeed: feed,
	})
	if err != nil {
		return fmt.Errorf("send wakes: %w", interpretError(ctx, err))
	}
	return nil
}

// channelSuffix follows the schema name in the wake channel's name.
const channelSuffix = "_wake"

// feedChannelSuffix follows the schema name in the change feed's channel,
// apart from the engines' wakes: an engine has nothing to do when a step
// completes, and a follower nothing when a run is due.
const feedChannelSuffix = "_feed"

// wakeChannel names the channel of a schema's wakes, cut to PostgreSQL's
// 63-byte identifier limit (pg_notify fails on a longer name). Two schemas
// alike in their first 58 bytes share a channel, which costs their engines
// a wasted look for work now and then, never a missed one.
func wakeChannel(schema string) string { return channelName(schema, channelSuffix) }

// feedChannel names the channel of a schema's feed wakes, like wakeChannel.
func feedChannel(schema string) string { return channelName(schema, feedChannelSuffix) }

func channelName(schema, suffix string) string {
	c := schema + suffix
	if len(c) > 63 {
		c = c[:63]
	}
	return c
}

// wakeRuns sends a wake of the given kind for each of ids: after the
// commit when t defers its wakes, else in t's transaction.
func (t *tx) wakeRuns(ctx context.Context, kind store.WakeKind, ids ...string) error {
	if len(ids) == 0 || t.s.noWakes {
		return nil
	}
	if t.deferWakes {
		t.wakes = append(t.wakes, wakeReq{kind: kind, ids: slices.Clone(ids)})
		return nil
	}
	idsJSON, _ := json.Marshal(ids) // a []string always marshals
	err := t.q.WakeRuns(ctx, pgdb.WakeRunsParams{Channel: t.s.channel, Kind: string(kind), Ids: string(idsJSON)})
	if err != nil {
		return fmt.Errorf("notify %s wake: %w", kind, interpretError(ctx, err))
	}
	return nil
}

// wakeQueue sends a ready wake for a queue, as wakeRuns does.
func (t *tx) wakeQueue(ctx context.Context, queue string) error {
	if t.s.noWakes {
		return nil
	}
	if t.deferWakes {
		t.wakes = append(t.wakes, wakeReq{queue: queue})
		return nil
	}
	if err := t.q.WakeQueue(ctx, pgdb.WakeQueueParams{Channel: t.s.channel, Queue: queue}); err != nil {
		return fmt.Errorf("notify queue %s: %w", queue, interpretError(ctx, err))
	}
	return nil
}

// wakePayload is the JSON a wake carries (wakes.sql builds it).
type wakePayload struct {
	Kind  string  `json:"k"`
	Queue string  `json:"q"`
	RunID *string `json:"r"`
	DueAt int64   `json:"d"`
}

func parseWake(payload string) (store.Wake, bool) {
	var p wakePayload
	if err := json.Unmarshal([]byte(payload), &p); err != nil || p.Kind == "" {
		return store.Wake{}, false // not ours: someone else NOTIFYing on the channel
	}
	w := store.Wake{Kind: store.WakeKind(p.Kind), Queue: p.Queue, DueAt: p.DueAt}
	if p.RunID != nil {
		w.RunID = *p.RunID
	}
	return w, true
}

// Listen timings. A vanished server (a cut network, a crashed machine)
// shows no error on an idle connection, so the listener pings it after
// listenIdle without a notification (Store.listenIdle, which tests
// shorten); a failed connection is retried after a delay that doubles
// from listenRetryMin up to listenRetryMax.
const (
	listenIdle     = 30 * time.Second
	listenPingWait = 10 * time.Second
	listenRetryMin = 100 * time.Millisecond
	listenRetryMax = 5 * time.Second
)

// Listen implements store.Notifier, until ctx ends or the store is closed.
// It listens on a connection of its own,
// outside the pool: a LISTEN lives as long as its session, and a pooled
// connection serving writers between waits would miss notifications and
// take a slot writers need. The connection is opened with the settings of
// the pool's connections (Open's DSN, or those of a connection of
// OpenDB's pool, which must then be pgx's stdlib driver: other drivers get
// flowtype.ErrNotSupported).
//
// Once listening, at first and after every reconnection, it calls fn with
// a store.WakeAll: wakes committed while it was not listening are lost,
// and the first one also tells the caller that wakes from now on will
// arrive. The WakeAll after a lost connection carries the error that
// ended it in Err. LISTEN is the one statement written here rather than in
// db/queries: it runs on a pgx connection, not through database/sql, and
// takes the channel as an identifier, not a parameter.
func (s *Store) Listen(ctx context.Context, fn func(store.Wake)) error {
	cfg, err := s.listenConfig(ctx)
	if err != nil {
		return fmt.Errorf("listen for wakes: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.closedCtx, cancel)()
	retry := listenRetryMin
	var lost error // why the last connection ended, or nil
	for {
		conn, err := s.listenConnect(ctx, cfg)
		if err == nil {
			retry = listenRetryMin
			fn(store.Wake{Kind: store.WakeAll, Err: lost})
			lost = nil
			err = receiveWakes(ctx, conn, s.listenIdle, fn)
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = conn.Close(closeCtx)
			cancel()
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			lost = err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
		retry = min(2*retry, listenRetryMax)
	}
}

// listenConfig returns the settings of the listener's connection.
func (s *Store) listenConfig(ctx context.Context) (*pgx.ConnConfig, error) {
	if s.closed.Load() {
		return nil, flowtype.ErrClosed
	}
	if s.noWakes {
		return nil, fmt.Errorf("%w: the store was opened with Options.NoWakes", flowtype.ErrNotSupported)
	}
	if s.readOnly != "" {
		return nil, fmt.Errorf("%w: a standby cannot LISTEN; the change feed and waits read it by polling", flowtype.ErrNotSupported)
	}
	if s.directConfig != nil {
		return s.directConfig.Copy(), nil
	}
	if s.pooler == TransactionPooler {
		return nil, fmt.Errorf("%w: behind a transaction pooler, LISTEN holds on no session; wakes from other processes are found by polling (Options.DirectDSN would listen on the server itself)", flowtype.ErrNotSupported)
	}
	if s.connConfig != nil {
		return s.connConfig.Copy(), nil
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the pool's connection settings: %w", interpretError(ctx, err))
	}
	defer c.Close()
	var cfg *pgx.ConnConfig
	err = c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("%w: the pool's driver is %T, not pgx's stdlib driver", flowtype.ErrNotSupported, dc)
		}
		cfg = sc.Conn().Config()
		return nil
	})
	if err != nil && !errors.Is(err, sql.ErrConnDone) {
		return nil, fmt.Errorf("read the pool's connection settings: %w", err)
	}
	if cfg == nil {
		return nil, fmt.Errorf("read the pool's connection settings: %w", err)
	}
	return cfg, nil
}

// listenConnect opens the listener's connection and starts listening on
// the store's channel.
func (s *Store) listenConnect(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	return listenOn(ctx, cfg, s.channel)
}

// listenOn opens a connection of cfg's and listens on channel there.
func listenOn(ctx context.Context, cfg *pgx.ConnConfig, channel string) (*pgx.Conn, error) {
	cfg = cfg.Copy()
	// The settings of a pool's connection carry that connection's own
	// notification buffer, which would swallow the listener's: pgx
	// installs a fresh one when there is none.
	cfg.OnNotification = nil
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect listener: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("listen on %s: %w", channel, err)
	}
	return conn, nil
}

// receiveWakes hands the notifications of conn to fn until ctx ends or the
// connection fails, pinging it when it has been quiet for idle.
func receiveWakes(ctx context.Context, conn *pgx.Conn, idle time.Duration, fn func(store.Wake)) error {
	return receive(ctx, conn, idle, func(payload string) {
		if w, ok := parseWake(payload); ok {
			fn(w)
		}
	})
}

// receive hands the payloads of conn's notifications to fn until ctx ends
// or the connection fails, pinging it when it has been quiet for idle.
func receive(ctx context.Context, conn *pgx.Conn, idle time.Duration, fn func(payload string)) error {
	for {
		waitCtx, cancel := context.WithTimeout(ctx, idle)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			if n == nil { // pgx handed it to another handler: none here
				continue
			}
			fn(n.Payload)
			continue
		case ctx.Err() != nil:
			return nil
		case !pgconn.Timeout(err):
			return fmt.Errorf("wait for wakes: %w", err)
		}
		// Quiet for idle: make sure the server is still there (the
		// deadline that ended the wait leaves the connection usable).
		pingCtx, cancel := context.WithTimeout(ctx, listenPingWait)
		err = conn.Ping(pingCtx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("ping listener connection: %w", err)
		}
	}
}

// wakeInserted sends the ready wakes of runs just inserted: one per queue
// for the runs due at once, however many (a wake only says where to look:
// the engines claim what is there), and one per run for the runs due
// later, whose due time the receiver may wait for.
func (t *tx) wakeInserted(ctx context.Context, runs []store.RunInsertParams) error {
	var later []string
	var queues []string
	for _, p := range runs {
		if p.RunAt > p.Now {
			later = append(later, p.ID)
		} else if !slices.Contains(queues, p.Queue) {
			queues = append(queues, p.Queue)
		}
	}
	for _, q := range queues {
		if err := t.wakeQueue(ctx, q); err != nil {
			return err
		}
	}
	return t.wakeRuns(ctx, store.WakeReady, later...)
}

package flow

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/flowlite/flowlite/internal/feed"
	"github.com/flowlite/flowlite/internal/store"
)

// Change is one entry of the change feed: an event of a run's history
// (Kind is one of the Event* kinds) at its position in the feed. Its JSON
// form is the one `flowlite changes --json` prints and the dashboards'
// change streams send.
type Change struct {
	// Position orders the feed. It grows with every change, is never
	// handed out twice, and is the cursor to resume after. (Except after
	// a failover to an asynchronous PostgreSQL standby that lost the last
	// commits: their positions are handed out again; docs/postgresql.md,
	// "Failover".)
	Position   int64     `json:"position"`
	RunID      string    `json:"run"`
	At         time.Time `json:"at"`
	Kind       string    `json:"kind"`
	Step       string    `json:"step,omitempty"`
	Occurrence int       `json:"occurrence"`
	Attempt    int       `json:"attempt,omitempty"`
	Detail     string    `json:"detail,omitempty"`
}

// ChangesOptions says where Changes starts and whether it follows.
type ChangesOptions struct {
	// Consumer names a durable consumer, whose position is stored in the
	// database: it resumes after the last change it acknowledged, in this
	// process or another, after a crash too. Changes acknowledges a
	// change once the loop body that received it returned, in batches (at
	// the end of every page and when the loop ends), so delivery is at
	// least once: make handling idempotent, e.g. by Position. An
	// acknowledgement (and a new consumer's registration) that finds the
	// database locked by another process past the busy timeout is retried,
	// as the engine's own writes are, until ctx ends (the last one, as the
	// iteration ends, for at most 10s); it does not end the read. Empty: an
	// anonymous read that stores nothing.
	Consumer string
	// After is the position an anonymous read, or a consumer's first
	// read, starts after. Zero: every change the feed still holds whole
	// (those after the highest position retention deleted).
	After int64
	// Follow waits for new changes until ctx ends; otherwise the
	// iteration stops at the newest change committed.
	Follow bool
	// PollInterval is how often a follower looks for changes committed by
	// other processes; this engine's own commits wake it at once. Default
	// 250ms.
	PollInterval time.Duration
}

// ErrFeedBehind is matched (errors.Is) by the error of a change-feed read
// that fell behind retention; errors.As with *FeedBehindError gives the
// consumer, its position and the oldest complete position.
var ErrFeedBehind = fmt.Errorf("change feed reader fell behind retention")

// FeedBehindError is returned by Changes when retention deleted changes the
// reader had not read yet. Set Config.RetentionWaitsForConsumers to make
// retention keep them for registered consumers instead.
type FeedBehindError struct {
	Consumer      string // empty for an anonymous read
	Position      int64  // where the reader was
	PurgedThrough int64  // the highest position deleted
}

func (e *FeedBehindError) Error() string {
	return (&feed.BehindError{Consumer: e.Consumer, Position: e.Position, PurgedThrough: e.PurgedThrough}).Error()
}

// Is makes errors.Is(err, ErrFeedBehind) hold.
func (e *FeedBehindError) Is(target error) bool { return target == ErrFeedBehind }

// OldestComplete is the first position the reader can resume from and
// miss nothing the feed still holds.
func (e *FeedBehindError) OldestComplete() int64 { return e.PurgedThrough + 1 }

// Changes returns the change feed: every event of every run (started,
// claimed, waiting, finished, each step's start, completion, failure and
// compensation, signals, timers, schedule fires…), in the order of their
// positions, which is the order they committed in wherever one could
// depend on the other. Changes are final: no change with a smaller
// position commits after one was delivered (on PostgreSQL, changes of
// transactions still in flight are held back until they end).
//
//	for c, err := range eng.Changes(ctx, &flow.ChangesOptions{Consumer: "audit", Follow: true}) {
//		if err != nil {
//			return err
//		}
//		record(c) // idempotent: a crash may deliver c again
//	}
//
// The iteration ends after an error: the store's, a *FeedBehindError, or
// ctx.Err() when following. opts may be nil.
//
// Each file of a sharded engine has a feed of its own: positions are a
// file's commit order, and one int64 position cannot say where a reader is
// in N files, nor is there an order between two files' commits to merge
// them by. On a sharded engine Changes yields one error matching
// ErrSharded; read each shard's feed with Shard(i).Changes, with its own
// positions and consumers (run IDs tell which run a change is of, and a
// run's changes are all in one shard's feed).
func (e *Engine) Changes(ctx context.Context, opts *ChangesOptions) iter.Seq2[Change, error] {
	inner, err := e.route.one("read the change feed")
	if err != nil {
		return func(yield func(Change, error) bool) { yield(Change{}, err) }
	}
	var o ChangesOptions
	if opts != nil {
		o = *opts
	}
	events := feed.Read(ctx, inner.store, feed.Options{
		Consumer: o.Consumer, After: o.After, Follow: o.Follow, PollInterval: o.PollInterval,
	})
	return func(yield func(Change, error) bool) {
		for ev, err := range events {
			if err != nil {
				yield(Change{}, feedError(err))
				return
			}
			if !yield(changeOf(ev), nil) {
				return
			}
		}
	}
}

func feedError(err error) error {
	if b, ok := err.(*feed.BehindError); ok {
		return &FeedBehindError{Consumer: b.Consumer, Position: b.Position, PurgedThrough: b.PurgedThrough}
	}
	return err
}

func changeOf(ev store.Event) Change {
	return Change{
		Position: ev.ID, RunID: ev.RunID, At: millis(ev.At), Kind: ev.Kind, Step: ev.Step,
		Occurrence: ev.Occurrence, Attempt: ev.Attempt, Detail: ev.Detail,
	}
}

// ChangeConsumer is a durable consumer of the change feed.
type ChangeConsumer struct {
	Name      string
	Position  int64 // every change at or before it was acknowledged
	CreatedAt time.Time
	AckedAt   time.Time
}

// ChangeConsumers lists the change feed's registered consumers, by name.
func (e *Engine) ChangeConsumers(ctx context.Context) ([]ChangeConsumer, error) {
	inner, err := e.route.one("list change consumers")
	if err != nil {
		return nil, err
	}
	cs, err := inner.store.Reader().FeedConsumerList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ChangeConsumer, len(cs))
	for i, c := range cs {
		out[i] = ChangeConsumer{Name: c.Name, Position: c.Position, CreatedAt: millis(c.CreatedAt), AckedAt: millis(c.AckedAt)}
	}
	return out, nil
}

// DeleteChangeConsumer forgets a consumer (retention stops waiting for
// it) and reports whether it existed. A database locked by another
// process past the busy timeout is retried until ctx ends, as a consumer's
// acknowledgements are.
func (e *Engine) DeleteChangeConsumer(ctx context.Context, name string) (bool, error) {
	inner, err := e.route.one("delete change consumer " + name)
	if err != nil {
		return false, err
	}
	var deleted bool
	err = store.RetryBusy(ctx, func() error {
		return inner.store.Write(ctx, func(tx store.Tx) error {
			var err error
			deleted, err = tx.FeedConsumerDelete(ctx, name)
			return err
		})
	}, nil)
	if err != nil {
		return false, fmt.Errorf("delete change consumer %q: %w", name, err)
	}
	return deleted, nil
}

// Package feed reads the change feed of a store: every run's events in
// position order, for an anonymous reader or a durable named consumer,
// once or following new commits. It keeps the cursor rules in one place
// for the Go API (flow.Engine.Changes), the CLI and the dashboard's
// stream.
//
// It imports internal/store, flow/flowtype and the standard library only.
package feed

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Options says where a read starts and how it goes on.
type Options struct {
	// Consumer names a durable consumer. It resumes after the position it
	// acknowledged last, and its position is acknowledged as the caller
	// handles events (see Read). Empty: an anonymous read, which stores
	// nothing.
	Consumer string
	// After is where an anonymous read starts, or a new consumer: after
	// this position. Zero: after the highest position retention deleted,
	// i.e. every event the feed still holds whole. A registered consumer
	// ignores it and resumes where it was.
	After int64
	// Follow keeps the read going, waiting for new events, until ctx
	// ends. Otherwise it stops once it delivered what was committed.
	Follow bool
	// PollInterval is how often a follower looks for events committed by
	// other processes; commits of this process wake it at once. Default
	// 250ms.
	PollInterval time.Duration
	// PageSize is how many events one read fetches. Default 256.
	PageSize int
	// Now tells time for acknowledgements (Unix milliseconds). Default the
	// system clock.
	Now func() int64
}

// BehindError is returned when retention deleted events a reader had not
// read: the reader's position is below the highest position deleted, so
// it may have missed some. The consumer can resume after PurgedThrough,
// accepting the loss, or retention can wait for consumers
// (flow.Config.RetentionWaitsForConsumers).
type BehindError struct {
	Consumer      string // empty for an anonymous read
	Position      int64
	PurgedThrough int64 // the oldest position the feed holds whole is the next one
}

func (e *BehindError) Error() string {
	who := "anonymous change-feed reader"
	if e.Consumer != "" {
		who = fmt.Sprintf("change-feed consumer %q", e.Consumer)
	}
	return fmt.Sprintf("%s at position %d fell behind retention: events through position %d were deleted; the oldest position still complete is %d",
		who, e.Position, e.PurgedThrough, e.PurgedThrough+1)
}

// finalAckWait bounds how long the acknowledgement made as a read ends
// retries a locked database (see ack): made after ctx ended too, it must
// not hold the end of the iteration for long.
const finalAckWait = 10 * time.Second

// heldBackRetry is how soon a reader looks again when committed events
// exist past what the store delivers: the store holds them back until
// transactions in flight end, which takes about one transaction.
const heldBackRetry = 2 * time.Millisecond

// Read returns the events of the feed from where o says, in position
// order. A consumer's position is acknowledged at the end of every page
// and when the loop ends, through the last event whose loop body
// completed (yield returned true): an event the loop broke on is not
// acknowledged, so it comes again next time. Delivery is at least once: a
// crash between handling an event and its acknowledgement redelivers it.
//
// The iteration ends with a non-nil error (and no more events) when the
// store fails, when the reader fell behind retention (*BehindError), or
// when ctx ends while following (ctx.Err()).
func Read(ctx context.Context, s store.Store, o Options) iter.Seq2[store.Event, error] {
	if o.PollInterval <= 0 {
		o.PollInterval = 250 * time.Millisecond
	}
	if o.PageSize <= 0 {
		o.PageSize = 256
	}
	if o.Now == nil {
		o.Now = func() int64 { return time.Now().UnixMilli() }
	}
	return func(yield func(store.Event, error) bool) {
		r := &reader{s: s, o: o}
		if err := r.run(ctx, yield); err != nil {
			yield(store.Event{}, err)
		}
	}
}

type reader struct {
	s     store.Store
	o     Options
	after int64 // last position delivered and handled
	acked int64 // last position acknowledged
}

func (r *reader) run(ctx context.Context, yield func(store.Event, error) bool) (err error) {
	if err := r.start(ctx); err != nil {
		return err
	}
	defer func() {
		// The caller's loop ended (or the read failed, or ctx ended): keep
		// what it handled.
		ackCtx := context.WithoutCancel(ctx)
		until, cancel := context.WithTimeout(ackCtx, finalAckWait)
		defer cancel()
		if ackErr := r.ack(ackCtx, until); ackErr != nil && err == nil {
			err = ackErr
		}
	}()
	var notify store.FeedNotifier
	if n, ok := r.s.(store.FeedNotifier); ok {
		notify = n
	}
	poll := time.NewTimer(0)
	defer poll.Stop()
	var heldBack time.Duration // the last wait for held-back events
	for {
		var committed <-chan struct{}
		if notify != nil && r.o.Follow {
			// Taken before reading, so a commit during the read is not missed.
			committed = notify.FeedCommitted()
		}
		page, err := r.s.Reader().EventFeed(ctx, r.after, r.o.PageSize)
		if err != nil {
			return fmt.Errorf("read change feed: %w", err)
		}
		if err := r.checkRetention(ctx); err != nil {
			return err
		}
		for _, e := range page {
			if !yield(e, nil) {
				return nil
			}
			r.after = e.ID
		}
		if len(page) > 0 {
			if err := r.ack(ctx, ctx); err != nil {
				return err
			}
			if len(page) == r.o.PageSize {
				continue
			}
		}
		last, err := r.s.Reader().FeedLast(ctx)
		if err != nil {
			return fmt.Errorf("read change feed: %w", err)
		}
		wait := r.o.PollInterval
		if last > r.after {
			// Committed, but held back: the transactions in flight usually
			// end within a few milliseconds; one left open for long (in any
			// database of a PostgreSQL server) makes the retries back off
			// to the poll interval.
			if len(page) > 0 || heldBack == 0 {
				heldBack = heldBackRetry
			} else {
				heldBack = min(2*heldBack, r.o.PollInterval)
			}
			wait = heldBack
		} else if !r.o.Follow {
			return nil
		}
		poll.Reset(wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-committed:
		case <-poll.C:
		}
	}
}

// start finds where the read begins, registering a new consumer there.
func (r *reader) start(ctx context.Context) error {
	purged, err := r.s.Reader().FeedPurgedThrough(ctx)
	if err != nil {
		return fmt.Errorf("start change feed: %w", err)
	}
	if r.o.Consumer == "" {
		r.after = max(r.o.After, purged)
		if r.o.After > 0 && r.o.After < purged {
			return &BehindError{Position: r.o.After, PurgedThrough: purged}
		}
		return nil
	}
	c, err := r.s.Reader().FeedConsumerGet(ctx, r.o.Consumer)
	switch {
	case err == nil:
		r.after, r.acked = c.Position, c.Position
		return r.checkRetention(ctx)
	case !errors.Is(err, flowtype.ErrRunNotFound):
		return fmt.Errorf("start change feed: %w", err)
	}
	r.after = r.o.After
	if r.after == 0 {
		r.after = purged
	}
	if r.after < purged {
		return &BehindError{Consumer: r.o.Consumer, Position: r.after, PurgedThrough: purged}
	}
	r.acked = -1 // register it now, so that retention can wait for it
	return r.ack(ctx, ctx)
}

// checkRetention fails the read when retention deleted events after the
// reader's position. It runs after each page is read, so a delete that
// raced the read is caught: the page may lack the events it deleted.
func (r *reader) checkRetention(ctx context.Context) error {
	purged, err := r.s.Reader().FeedPurgedThrough(ctx)
	if err != nil {
		return fmt.Errorf("read change feed: %w", err)
	}
	if purged > r.after {
		return &BehindError{Consumer: r.o.Consumer, Position: r.after, PurgedThrough: purged}
	}
	return nil
}

// ack stores the consumer's position when it moved (and registers a new
// consumer). Like the engine's own writes it retries a write that waited
// out the busy timeout (store.RetryBusy), until until ends: with other
// processes writing constantly, one write can find the lock taken for all
// of its wait while theirs commit, and a read that failed so would end
// over a write that the next try makes.
func (r *reader) ack(ctx, until context.Context) error {
	if r.o.Consumer == "" || r.after == r.acked {
		return nil
	}
	err := store.RetryBusy(until, func() error {
		return r.s.Write(ctx, func(tx store.Tx) error {
			return tx.FeedConsumerAck(ctx, r.o.Consumer, r.after, r.o.Now())
		})
	}, nil)
	if err != nil {
		return fmt.Errorf("acknowledge change feed position %d of consumer %q: %w", r.after, r.o.Consumer, err)
	}
	r.acked = r.after
	return nil
}

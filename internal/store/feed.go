package store

import (
	"context"
	"math"
)

// FeedConsumer is a named, durable reader of the change feed: the position
// it acknowledged, after which it resumes.
type FeedConsumer struct {
	Name      string
	Position  int64 // every event at or before it was handled
	CreatedAt int64
	AckedAt   int64
}

// NoFeedConsumer is the KeepAfter of a retention delete that does not wait
// for the feed's consumers, and what FeedConsumerMinPosition returns when no
// consumer is registered.
const NoFeedConsumer = math.MaxInt64

// FeedReader reads the change feed: every run's events, in position order.
// An event's position is its ID; the package doc (# The change feed) says
// what a position guarantees.
type FeedReader interface {
	// EventFeed returns up to max events with positions after after, in
	// position order. It returns only final events: no event with a
	// smaller position than the last one returned can commit later, so a
	// reader that resumes after the last position it saw misses nothing.
	EventFeed(ctx context.Context, after int64, max int) ([]Event, error)
	// FeedPurgedThrough returns the highest position ever deleted, 0 when
	// no event was: a reader resuming below it may have missed events.
	FeedPurgedThrough(ctx context.Context) (int64, error)
	// FeedLast returns the newest committed position, 0 when there is
	// none. It may be newer than what EventFeed delivers yet.
	FeedLast(ctx context.Context) (int64, error)
	// FeedConsumerGet returns the consumer name, or flowtype.ErrRunNotFound.
	FeedConsumerGet(ctx context.Context, name string) (FeedConsumer, error)
	// FeedConsumerList returns every registered consumer, by name.
	FeedConsumerList(ctx context.Context) ([]FeedConsumer, error)
	// FeedConsumerMinPosition returns the lowest acknowledged position, or
	// NoFeedConsumer when no consumer is registered.
	FeedConsumerMinPosition(ctx context.Context) (int64, error)
}

// FeedTx records the feed's consumers.
type FeedTx interface {
	// FeedConsumerAck registers the consumer name at position, or moves its
	// position forward to position. A position never moves back, so a
	// stale acknowledgement (a consumer's previous process, say) changes
	// nothing.
	FeedConsumerAck(ctx context.Context, name string, position, now int64) error
	// FeedConsumerDelete forgets the consumer name and reports whether it
	// existed.
	FeedConsumerDelete(ctx context.Context, name string) (bool, error)
}

// FeedNotifier is implemented by stores that can tell the feed's readers in
// this process, at once, that events committed. Whether it hears other
// processes' commits is the adapter's to say: pgstore does (LISTEN on the
// schema's feed channel, apart from the engines' wakes); sqlitestore does
// not, and readers poll the file for them.
type FeedNotifier interface {
	// FeedCommitted returns a channel closed once a transaction that
	// appended events commits after the call.
	FeedCommitted() <-chan struct{}
}

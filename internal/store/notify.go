package store

import "context"

// Notifier is implemented by stores whose database can tell other
// processes, at once, that work appeared (PostgreSQL's LISTEN/NOTIFY). An
// engine learns of runs started elsewhere by polling; a Notifier only
// shortens that wait. Polling stays the correctness path: a wake can be
// lost (a dropped connection, a full queue of the listener), duplicated,
// or arrive for work another engine took already, and the engine must
// behave the same whether or not it came. So a wake carries hints, never
// state: the engine answers it by looking at the store as it would on a
// poll.
//
// Callers type-assert a Store to it; a store without such a channel (one
// SQLite file, where engines on one host poll it cheaply) does not
// implement it.
type Notifier interface {
	// Listen calls fn with every wake the store's writes send, its own
	// and other processes', until ctx ends or the store is closed, and
	// then returns nil; it returns an error only when it cannot listen at
	// all (the store was not opened in a way that allows it, or was
	// closed already).
	//
	// fn is called on Listen's goroutine, one wake at a time, and must not
	// block: a slow fn delays later wakes, never a writer. A lost
	// connection is reopened with backoff; once listening again, Listen
	// calls fn with a WakeAll, since wakes sent meanwhile are lost.
	Listen(ctx context.Context, fn func(Wake)) error
}

// WakeKind says what a wake announces.
type WakeKind string

const (
	// WakeReady: a run of Queue became ready, or will be at DueAt (it was
	// inserted, woken by a signal or a child, made due, resumed, requeued
	// or rescued).
	WakeReady WakeKind = "ready"
	// WakeCancel: cancellation of run RunID was requested. An engine
	// executing it can cancel its context at once instead of at its next
	// heartbeat; an idle one is now due in Queue, to unwind.
	WakeCancel WakeKind = "cancel"
	// WakeAll: wakes may have been lost (the listener reconnected); look
	// for work in every queue. Queue and RunID are empty.
	WakeAll WakeKind = "all"
)

// Wake is one notification: what happened, to which run, in which queue.
// It is sent by the transaction that made the change, and delivered only if
// that transaction commits.
type Wake struct {
	Kind  WakeKind
	Queue string // empty for WakeAll
	RunID string // empty for WakeAll and for a queue-wide wake (a queue resumed)
	// DueAt is when the run becomes due, Unix milliseconds on the writer's
	// clock; zero when unknown. A receiver may wait until then before
	// looking, rather than look now and find nothing due.
	DueAt int64
	// Err, on a WakeAll after a reconnection, is why the connection was
	// lost, for the receiver to log.
	Err error
}

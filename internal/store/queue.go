package store

import (
	"context"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// The job-queue side of the store: queue pauses, unique keys, dead letters
// and per-queue statistics.
//
// A unique key makes a run unique among the runs of its workflow in two
// ways, both enforced by the database so that no race between processes
// can break them: at most one run holds the key for good (an unfinished —
// pending, running, waiting, compensating or suspended — run with the key,
// or a finished one in a state its RunInsertParams.UniqueStates listed;
// see RunGetKeyHolder), and while a hold of the key is current and its
// holder in a state the hold counts (see UniqueHoldTake) no run with the
// key can be inserted.
//
// A dead letter is a failed run (its workflow failed for good and its
// completed steps were compensated) that was not requeued. Requeueing one
// inserts a fresh run with the same input and links the two (RequeuedFrom,
// RequeuedAs), which takes the failed run out of the dead letters.

// Queue is the recorded state of a queue. Only queues an operator paused
// or resumed have one; the others are not paused.
type Queue struct {
	Name      string
	Paused    bool
	CreatedAt int64
	UpdatedAt int64
}

// QueueCountsParams sets the times QueueCounts compares with.
type QueueCountsParams struct {
	Now       int64 // runs due at or before Now are ready
	MinuteAgo int64 // runs finished at or after it count in FinishedLastMinute
	HourAgo   int64 // and at or after it in FinishedLastHour
}

// QueueCounts counts the runs of one queue in one state.
type QueueCounts struct {
	Queue  string
	Status flowtype.RunStatus
	Runs   int64
	// Ready counts the runs that can be claimed now (unleased, due, and
	// pending, waiting or compensating), and OldestReadyAt is the earliest
	// due time among them (0: none).
	Ready              int64
	OldestReadyAt      int64
	FinishedLastMinute int64
	FinishedLastHour   int64
	Dead               int64 // failed runs not requeued
}

// DeadFilter selects dead letters. Empty strings and zero times match all.
type DeadFilter struct {
	Workflow       string
	Queue          string
	FinishedAfter  int64 // inclusive, Unix ms
	FinishedBefore int64 // exclusive, Unix ms
}

// DeadListParams selects dead letters to list, most recently failed first.
type DeadListParams struct {
	DeadFilter
	Limit int // default 100
}

// DeadBatchParams selects the next batch of a bulk operation on dead
// letters: up to Max of those f matches, in the order they failed, after
// the last one of the previous batch (AfterFinishedAt, AfterSeq; zero for
// the first batch), whose sequence number is at most UntilSeq. A run's
// sequence number grows with its insertion, so a bulk operation bounded by
// the RunSeqMax it read first does not reach the runs inserted after it
// started, such as the runs it requeued.
type DeadBatchParams struct {
	DeadFilter
	AfterFinishedAt int64
	AfterSeq        int64
	UntilSeq        int64
	Max             int
}

// DeadRun is a dead letter found by RunDeadBatch.
type DeadRun struct {
	ID         string
	Seq        int64
	FinishedAt int64
}

// DeadDeleteParams selects dead letters to delete: up to Max matching the
// filter whose sequence number is at most UntilSeq.
type DeadDeleteParams struct {
	DeadFilter
	UntilSeq int64
	Max      int
}

// UniqueHoldParams makes RunID hold a unique key of Workflow until
// HeldUntil, while it is in one of States (nil: in any state).
type UniqueHoldParams struct {
	Workflow  string
	Key       string
	RunID     string
	HeldUntil int64
	States    []flowtype.RunStatus
	Now       int64
}

// RunRequeueParams requeues the dead letter FromID as the new run ID.
type RunRequeueParams struct {
	FromID string
	ID     string
	Now    int64
}

// QueuePending counts the pending runs of a queue.
type QueuePending struct {
	Queue           string
	Runs            int64
	OldestCreatedAt int64 // creation time of the oldest, Unix ms
}

// QueueReader reads queues, unique keys and dead letters.
type QueueReader interface {
	// QueuePendingRuns counts the pending runs of every queue that has
	// some, by queue name.
	QueuePendingRuns(ctx context.Context) ([]QueuePending, error)
	// QueueList returns the queues an operator paused or resumed, by name.
	QueueList(ctx context.Context) ([]Queue, error)
	// QueueCounts counts runs by queue and state, in one pass over the runs.
	QueueCounts(ctx context.Context, p QueueCountsParams) ([]QueueCounts, error)
	// QueueDurations returns the durations, first claim to finish in Unix
	// ms, of up to limit runs of queue that completed at or after since, the
	// most recent first.
	QueueDurations(ctx context.Context, queue string, since int64, limit int) ([]int64, error)
	// RunGetKeyHolder returns the run of workflow holding the unique key
	// for good: the unfinished run with the key, or a finished one in a
	// state its UniqueStates listed (a requeued dead letter holds nothing);
	// or flowtype.ErrRunNotFound.
	RunGetKeyHolder(ctx context.Context, workflow, key string) (Run, error)
	// UniqueHoldGet returns the ID of the run whose hold of the unique key
	// is current at now, its holder being in a state the hold counts, or
	// flowtype.ErrRunNotFound.
	UniqueHoldGet(ctx context.Context, workflow, key string, now int64) (string, error)
	// RunDeadList lists dead letters, the most recently failed first.
	RunDeadList(ctx context.Context, p DeadListParams) ([]Run, error)
	// RunSeqMax returns the sequence number of the last run inserted (0
	// for none); see DeadBatchParams.
	RunSeqMax(ctx context.Context) (int64, error)
	// RunDeadBatch returns the next batch of dead letters of a bulk
	// operation.
	RunDeadBatch(ctx context.Context, p DeadBatchParams) ([]DeadRun, error)
}

// QueueTx writes queues, unique holds and dead letters inside a write
// transaction.
type QueueTx interface {
	// QueueSetPaused pauses or resumes a queue and reports whether that
	// changed its state.
	QueueSetPaused(ctx context.Context, name string, paused bool, now int64) (bool, error)
	// UniqueHoldTake makes p.RunID hold the unique key until p.HeldUntil:
	// it creates the hold or takes over one that no longer holds at p.Now
	// (its time is up, or its holder is in a state the hold does not
	// count), and reports false (changing nothing) while another hold
	// holds.
	UniqueHoldTake(ctx context.Context, p UniqueHoldParams) (bool, error)
	// RunRequeue inserts p.ID as a pending copy of the dead letter p.FromID
	// (same workflow version, queue, priority, input, unique key and
	// unique states; a deadline moved by the time since the dead letter was
	// created), links the two, and hands the dead letter's unique key and
	// holds over to the new run. It reports false, changing nothing, when
	// p.FromID is not a dead letter, p.ID is taken, or another run holds
	// the unique key.
	RunRequeue(ctx context.Context, p RunRequeueParams) (bool, error)
	// RunDeadDelete deletes dead letters with their steps, events, signals
	// and holds, and returns how many runs it deleted. It keeps a failed
	// child of an unfinished parent, which may still read its outcome.
	RunDeadDelete(ctx context.Context, p DeadDeleteParams) (int, error)
	// RunDeadDeleteByID deletes the dead letter id like RunDeadDelete, and
	// reports false, changing nothing, when id is not a dead letter or is
	// the failed child of an unfinished parent.
	RunDeadDeleteByID(ctx context.Context, id string) (bool, error)
}

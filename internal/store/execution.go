package store

import "context"

// Executions (continue-as-new): a run whose body continues as new ends its
// current execution and starts the next under the same ID, with a new
// input and no step records. A run is in execution 1 until it first
// continues; ExecutionReader says which one it is in.

// Execution is where a run stands in its chain of executions.
type Execution struct {
	Number      int   // the current execution; 1 for a run that never continued
	ContinuedAt int64 // when the one before continued as new; zero in execution 1
}

// RunContinueParams is the next execution of a run: its input and the
// workflow version it runs on.
type RunContinueParams struct {
	Input   []byte
	Version int
	Now     int64
}

// ExecutionReader reads a run's execution number.
type ExecutionReader interface {
	// ExecutionGet returns the run's current execution: number 1 for a run
	// that never continued (or is unknown).
	ExecutionGet(ctx context.Context, runID string) (Execution, error)
}

// ExecutionTx ends executions inside a write transaction.
type ExecutionTx interface {
	// RunContinue ends the current execution of the running run leased by
	// l, all in the caller's transaction: the run becomes pending, due at
	// Now, with the given input and version and its lease given back; its
	// step records are deleted; the signals it received are retired (their
	// consumed_by prefixed with "execution N: ", so no wait of the next
	// execution takes them for its own; pending ones stay pending); and its
	// execution number goes up by one, which RunContinue returns. It
	// returns ErrLeaseLost, changing nothing, when the lease is no longer
	// current.
	RunContinue(ctx context.Context, l Lease, p RunContinueParams) (int, error)
}

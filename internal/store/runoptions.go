package store

import "context"

// StartOptions are what a run keeps of how it was started beyond its
// queue, deadline and unique key (issue 27). The adapters record them
// with a statement of their own after the insert (RunSetStartOptions),
// which only runs that have one pay for, and every read of a run returns
// them.
type StartOptions struct {
	// Timeout, in ms, bounds how long the run may take from its first
	// claim: that claim sets its deadline to the claim's time plus
	// Timeout, or keeps an earlier deadline the run had. Zero: none.
	Timeout int64
	// Detached marks a child that its parent's cancellation does not reach
	// (RunCancelChildren skips it).
	Detached bool
	// Context holds the values propagated from the starter into every
	// step, child and compensation of the run: a JSON object of strings,
	// or nil for none.
	Context []byte
	// ConcurrencyKey groups the run with the others of its queue that
	// share it, for per-key limits and fair claims (see limit.go); '':
	// none.
	ConcurrencyKey string
}

// IsZero reports whether o sets nothing, so that an insert of a run
// without options costs no statement more.
func (o StartOptions) IsZero() bool {
	return o.Timeout == 0 && !o.Detached && len(o.Context) == 0 && o.ConcurrencyKey == ""
}

// ReuseTx frees the ID of a finished run for a new run, inside a write
// transaction (flow.ReuseFinished, flow.ReuseFailed).
type ReuseTx interface {
	// RunDeleteForReuse deletes the failed or cancelled run id (or, with
	// completedToo, a completed one) with its steps, events, signals and
	// unique holds, and reports false, changing nothing, when id is
	// unknown, in another state, or the child of an unfinished parent other
	// than parentID (which may still read its outcome).
	RunDeleteForReuse(ctx context.Context, id, parentID string, completedToo bool) (bool, error)
}

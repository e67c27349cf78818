package flow

import "github.com/flowlite/flowlite/flow/flowtype"

// IDReusePolicy says whether a start may take the run ID of a finished
// run (StartOptions.IDReuse, ChildOptions.IDReuse). See
// [flowtype.IDReusePolicy].
type IDReusePolicy = flowtype.IDReusePolicy

// Run ID reuse policies.
const (
	// ReuseNever keeps a taken ID's run: Start returns it, StartChild
	// fails with ErrRunExists. It is the default.
	ReuseNever = flowtype.ReuseNever
	// ReuseFinished lets a start take the ID of a completed, failed or
	// cancelled run, whose record (steps, history, signals) is deleted.
	ReuseFinished = flowtype.ReuseFinished
	// ReuseFailed lets a start take the ID of a failed or cancelled run
	// only; a completed run keeps its ID.
	ReuseFailed = flowtype.ReuseFailed
)

package flow

import "github.com/flowlite/flowlite/flow/flowtype"

// ErrDuplicate matches the *DuplicateError of a Start, StartTx, Enqueue or
// EnqueueTx refused under RefuseDuplicate because another run holds its
// unique key; nothing was recorded.
var ErrDuplicate = flowtype.ErrDuplicate

// DuplicatePolicy says what a start whose unique key another run holds
// does (StartOptions.OnDuplicate, EnqueueOptions.OnDuplicate). See
// [flowtype.DuplicatePolicy].
type DuplicatePolicy = flowtype.DuplicatePolicy

// Duplicate policies.
const (
	// ReturnExisting returns a handle on the run that holds the key (its
	// Existing reports true) and records nothing. It is the default.
	ReturnExisting = flowtype.ReturnExisting
	// RefuseDuplicate fails the start with a *DuplicateError naming the
	// holder, and records nothing (DBOS's behaviour for a duplicate
	// deduplication ID).
	RefuseDuplicate = flowtype.RefuseDuplicate
)

// DuplicateError reports a start refused under RefuseDuplicate; it
// matches ErrDuplicate. See [flowtype.DuplicateError] for its fields.
type DuplicateError = flowtype.DuplicateError

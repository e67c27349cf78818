package flowtype

import (
	"errors"
	"fmt"
)

// Sentinel of refused duplicates.
var (
	// ErrDuplicate matches the DuplicateError of a start refused because
	// another run holds its unique key (RefuseDuplicate).
	ErrDuplicate = errors.New("duplicate run")
)

// DuplicatePolicy says what a start whose unique key another run holds
// does. The zero value, ReturnExisting, is the original behaviour.
type DuplicatePolicy int

// Duplicate policies, for flow.StartOptions.OnDuplicate and
// flow.EnqueueOptions.OnDuplicate.
const (
	// ReturnExisting returns a handle on the run that holds the key (its
	// Existing reports true) and records nothing: River's and flowlite's
	// default, for callers that want "at most one", whoever started it.
	ReturnExisting DuplicatePolicy = iota
	// RefuseDuplicate fails the start with a DuplicateError naming the
	// holder and records nothing: DBOS's default for a deduplication ID,
	// for callers that must know their start did not happen.
	RefuseDuplicate
)

// String returns "return existing" or "refuse".
func (p DuplicatePolicy) String() string {
	switch p {
	case ReturnExisting:
		return "return existing"
	case RefuseDuplicate:
		return "refuse"
	}
	return fmt.Sprintf("DuplicatePolicy(%d)", int(p))
}

// DuplicateError reports a start refused under RefuseDuplicate because
// another run holds its unique key. It matches ErrDuplicate. Nothing was
// recorded.
type DuplicateError struct {
	RunID        string    // the run ID the refused start asked for
	Workflow     string    // the workflow it would have started
	UniqueKey    string    // the key it asked for
	HolderID     string    // the run that holds the key
	HolderStatus RunStatus // the holder's state when the start was refused
}

// Error names the refused run, the key and its holder.
func (e *DuplicateError) Error() string {
	return fmt.Sprintf("start run %s of %s: unique key %q is held by run %s (%s)", e.RunID, e.Workflow, e.UniqueKey, e.HolderID, e.HolderStatus)
}

// Is reports whether target is ErrDuplicate.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicate }

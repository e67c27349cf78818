package flowtype

import (
	"errors"
	"fmt"
)

// ErrDuplicate matches the DuplicateError of a start refused because
// another run holds its unique key (flow.RefuseDuplicate).
var ErrDuplicate = errors.New("duplicate run")

// DuplicatePolicy says what a start whose unique key another run holds
// does. The zero value, ReturnExisting, is the original behaviour.
type DuplicatePolicy int

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
// the run HolderID (of Workflow, in HolderStatus) holds UniqueKey. It
// matches ErrDuplicate. Nothing was recorded.
type DuplicateError struct {
	RunID        string // the run ID the refused start asked for
	Workflow     string
	UniqueKey    string
	HolderID     string
	HolderStatus RunStatus
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("start run %s of %s: unique key %q is held by run %s (%s)", e.RunID, e.Workflow, e.UniqueKey, e.HolderID, e.HolderStatus)
}

// Is reports whether target is ErrDuplicate.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicate }

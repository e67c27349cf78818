package flowdef

import (
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/flow"
)

// nameNode says which node err comes from, unless err names it already: a
// node's step is recorded under the node's ID, so the error of its step
// (a *flow.StepError, "step notify failed after 1 attempt(s): …") names
// it, and a prefix would say it twice.
func nameNode(id string, err error) error {
	var se *flow.StepError
	if errors.As(err, &se) && se.Step == id {
		return err
	}
	return fmt.Errorf("step %s: %w", id, err)
}

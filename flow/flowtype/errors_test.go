package flowtype_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// ErrDefinitionNotFound and ErrRunNotFound (flow's ErrRunNotFound) are
// distinct sentinels with distinct codes, and each keeps matching only
// itself once recorded as a step's error and rebuilt from its code.
func TestNotFoundSentinelsAreDistinct(t *testing.T) {
	t.Parallel()
	def, run := flowtype.ErrDefinitionNotFound, flowtype.ErrRunNotFound
	if errors.Is(def, run) || errors.Is(run, def) || def.Error() == run.Error() {
		t.Fatalf("%q and %q are not distinct", def, run)
	}
	for _, c := range []struct {
		err, other error
		code       string
	}{
		{def, run, flowtype.CodeDefinitionNotFound},
		{run, def, flowtype.CodeRunNotFound},
	} {
		wrapped := fmt.Errorf("lookup: %w", c.err)
		if got := flowtype.EngineCode(wrapped); got != c.code {
			t.Errorf("EngineCode(%v) = %q, want %q", wrapped, got, c.code)
		}
		rebuilt := &flowtype.Error{Code: c.code, Message: wrapped.Error()}
		if !errors.Is(rebuilt, c.err) || errors.Is(rebuilt, c.other) {
			t.Errorf("rebuilt %s matches %v: %t, %v: %t; want true, false",
				c.code, c.err, errors.Is(rebuilt, c.err), c.other, errors.Is(rebuilt, c.other))
		}
	}
}

package flowui_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind: the
// handler starts none of its own, so whatever is left is a leak of a
// request or of the engine it reads.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

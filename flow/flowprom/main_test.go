package flowprom_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind: a
// scrape starts none, so whatever is left is a leak of a scrape or of
// the engine it reads.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

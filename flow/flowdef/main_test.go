package flowdef_test

import (
	"github.com/flowlite/flowlite/internal/pgtest"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind: a
// wave's branches and a fan-out's items must all end with their run.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.Cleanup(pgtest.OwnDatabase())) }

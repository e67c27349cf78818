package metrics_test

import (
	"testing"

	"github.com/flowlite/flowlite/internal/pgtest"
)

// TestMain runs the PostgreSQL tests of the package (on a standby) in a
// database of their own.
func TestMain(m *testing.M) { pgtest.OwnDatabase()(m.Run()) }

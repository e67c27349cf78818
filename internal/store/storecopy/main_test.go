package storecopy

import (
	"testing"

	"github.com/flowlite/flowlite/internal/pgtest"
)

// TestMain runs the package's PostgreSQL tests in a database of their own.
func TestMain(m *testing.M) { pgtest.OwnDatabase()(m.Run()) }

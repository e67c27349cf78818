package crashtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/flowlite/flowlite/internal/pgtest"
)

// The crash suite on PostgreSQL: the shared workers of shared_test.go on
// one schema, killed at random (here), and, in pgfaults_test.go, the
// server restarted and the engines' sessions terminated under them.
//
// These tests need a PostgreSQL server (internal/pgtest: FLOWLITE_PG_DSN,
// by default the local one) and run when FLOWLITE_PG_TEST=1 asks for it,
// as CI does; a server that cannot be reached then fails them.

// pgHarness returns a harness whose workers share a fresh schema, dropped
// when the test ends, or skips the test unless FLOWLITE_PG_TEST=1 or
// FLOWLITE_PG_FAULTS=1 asks for PostgreSQL.
func pgHarness(t *testing.T) *harness {
	t.Helper()
	if os.Getenv("FLOWLITE_PG_TEST") != "1" && os.Getenv("FLOWLITE_PG_FAULTS") != "1" {
		t.Skip("PostgreSQL crash tests run with FLOWLITE_PG_TEST=1")
	}
	dsn, schema := pgtest.Schema(t)
	dir := t.TempDir()
	return &harness{
		t: t, dir: dir, ledger: filepath.Join(dir, "ledger.txt"),
		// A name of this test's own, so that the fault tests end exactly
		// the sessions of its engines.
		pg: &pgTarget{dsn: dsn, schema: schema, app: "flowlite_" + schema},
	}
}

// TestPGWorkersKilled: three worker processes on one PostgreSQL schema
// start the runs between them and work them, while the parent SIGKILLs one
// of them at random every few hundred milliseconds and starts a
// replacement; then three last workers drain. No run may be lost, no
// checkpointed step run again, no saga left half compensated, and no run
// rescued while its owner was alive (see checkRun and checkShared).
//
// Bounded to 300 runs and 8 kills (10-20 s); -args -long (or
// FLOWLITE_CRASH_LONG=1) runs the soak: 1,500 runs and 60 kills.
//
// Not parallel: its worker processes would load the two shared cores while
// the SQLite tests of the package time their lock waits (a rescue of
// TestRescueRacesCompletions waited past its 500ms busy timeout in a full
// go test ./...); sequential tests run before the parallel ones.
func TestPGWorkersKilled(t *testing.T) {
	h := pgHarness(t)
	total, kills := 300, 8
	if !testing.Short() && (*longFlag || os.Getenv("FLOWLITE_CRASH_LONG") == "1") {
		total, kills = 1500, 60
	}
	stopsAndKills(t, h, total, kills, false)
}

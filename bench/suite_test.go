package main

import (
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for the suite's binary: the suite
// runs each scenario as a child process of os.Executable, which under go
// test is this binary.
func TestMain(m *testing.M) {
	if slices.Contains(os.Args[1:], "-child") || slices.Contains(os.Args[1:], "-worker") {
		if err := run(); err != nil {
			os.Stderr.WriteString("bench: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSuiteSmoke runs every scenario of every system once at a tiny size,
// so the harness cannot rot: each must produce a figure, and the counts of
// drained jobs, finished workflows and latency samples must be exact. It
// needs what the suite needs: PostgreSQL (-pg / $FLOWLITE_BENCH_PG), node
// and redis-server.
func TestSuiteSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL databases, redis-server and node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cfg := suiteConfig{
		PGDSN:  "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
		Rounds: 1,
		Scale:  0.01,
		SVG:    t.TempDir() + "/chart.svg",
		JSON:   t.TempDir() + "/report.json",
		// A smoke test needs no quiet server: it waits briefly for the
		// lock whoever restarts PostgreSQL holds, then runs anyway.
		PGLockWait: 10 * time.Second,
	}
	if dsn := os.Getenv("FLOWLITE_BENCH_PG"); dsn != "" {
		cfg.PGDSN = dsn
	}
	rep, err := runSuite(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	if err := rerender(cfg.JSON, cfg, &table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "flowlite ÷ system") {
		t.Errorf("table from the saved report:\n%s", table.String())
	}
	want := 0
	for _, s := range rep.Scenarios {
		want += len(s.Systems)
	}
	if len(rep.Measurements) != want {
		t.Fatalf("%d measurements, want %d", len(rep.Measurements), want)
	}
	for _, m := range rep.Measurements {
		switch {
		case m.Err != "":
			t.Errorf("%s, %s: %s", m.Scenario, m.System, m.Err)
		case !(m.Value > 0):
			t.Errorf("%s, %s: figure %v", m.Scenario, m.System, m.Value)
		case m.Done != m.N:
			t.Errorf("%s, %s: %d done, want %d", m.Scenario, m.System, m.Done, m.N)
		case !(m.CPUSec > 0) || !(m.RSSMiB > 0):
			t.Errorf("%s, %s: CPU %v s, RSS %v MiB", m.Scenario, m.System, m.CPUSec, m.RSSMiB)
		}
	}
}

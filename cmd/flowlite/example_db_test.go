package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// exampleDB runs examples/ordersaga (20 orders: 15 completed, 4 rolled
// back, 1 suspended) and returns the database it leaves behind.
func exampleDB(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs examples/ordersaga")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "ordersaga")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/ordersaga").CombinedOutput(); err != nil {
		t.Fatalf("build examples/ordersaga: %v\n%s", err, out)
	}
	path := filepath.Join(dir, "orders.db")
	if out, err := exec.Command(bin, "-db", path, "-keep").CombinedOutput(); err != nil {
		t.Fatalf("run examples/ordersaga: %v\n%s", err, out)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// The commands on a database the main example produced.
func TestCommandsOnExampleDatabase(t *testing.T) {
	t.Parallel()
	path := exampleDB(t)

	stats := decode[statsJSON](t, ok(t, path, "stats", "--json"))
	if stats.Total != 20 || stats.Runs[flow.StatusCompleted] != 15 || stats.Runs[flow.StatusFailed] != 4 || stats.Runs[flow.StatusSuspended] != 1 {
		t.Fatalf("stats = %+v, want 20 runs: 15 completed, 4 failed, 1 suspended", stats)
	}

	suspended := decode[[]runJSON](t, ok(t, path, "runs", "--status", "suspended", "--json"))
	if len(suspended) != 1 || suspended[0].ID != "order-003" || suspended[0].Workflow != "place_order" {
		t.Fatalf("suspended runs = %+v, want order-003", suspended)
	}
	show := ok(t, path, "show", "order-003")
	for _, want := range []string{"suspended", "reserve_inventory#0", "charge_payment#0", "warehouse system unavailable"} {
		if !strings.Contains(show, want) {
			t.Errorf("show order-003 lacks %q:\n%s", want, show)
		}
	}
	history := ok(t, path, "history", "order-003")
	var kinds []string
	for _, line := range strings.Split(history, "\n") {
		for _, k := range []string{"run_started", "step_failed", "workflow_failed", "compensation_failed", "run_suspended"} {
			if strings.Contains(line, k) {
				kinds = append(kinds, k)
			}
		}
	}
	if !subsequence(kinds, []string{"run_started", "step_failed", "workflow_failed", "compensation_failed", "run_suspended"}) {
		t.Errorf("history order-003 events %v out of order:\n%s", kinds, history)
	}

	dead := decode[[]runJSON](t, ok(t, path, "dead", "list", "--json"))
	var deadIDs []string
	for _, r := range dead {
		deadIDs = append(deadIDs, r.ID)
	}
	slices.Sort(deadIDs)
	if !slices.Equal(deadIDs, []string{"order-007", "order-010", "order-014", "order-017"}) {
		t.Errorf("dead letters = %v", deadIDs)
	}
	if out := ok(t, path, "check"); out != "ok: the database file is sound\n" {
		t.Errorf("check: %q", out)
	}
	if out := ok(t, path, "queues"); !strings.Contains(out, "default") {
		t.Errorf("queues: %q", out)
	}
	// The example's engine reported what it did before it stopped.
	h := decode[healthJSON](t, ok(t, path, "health", "--json", "--all"))
	if len(h.Engines) != 1 || h.Engines[0].Metrics.RunsStarted != 20 ||
		h.Engines[0].Metrics.RunsFinished[flow.StatusCompleted] != 15 || h.Engines[0].Metrics.RunsFinished[flow.StatusFailed] != 4 ||
		h.Engines[0].Metrics.RunsFinished[flow.StatusSuspended] != 1 {
		t.Errorf("health engines = %+v, want the example's engine: 20 runs started, 15 completed, 4 failed, 1 suspended", h.Engines)
	}

	// Operator actions: nothing recorded changes when one is refused.
	before := ok(t, path, "history", "order-001", "--json")
	fails(t, exitError, "finished", "--db", path, "cancel", "order-001")
	fails(t, exitError, "not failed", "--db", path, "retry", "order-001")
	if after := ok(t, path, "history", "order-001", "--json"); after != before {
		t.Errorf("refused actions changed order-001's history")
	}
	ok(t, path, "resume", "order-003")
	if got := decode[runJSON](t, ok(t, path, "show", "order-003", "--json")); got.Status != flow.StatusCompensating {
		t.Errorf("after resume order-003 is %s, want compensating (an engine finishes the unwind)", got.Status)
	}
	ok(t, path, "retry", "order-010")
	if got := decode[statsJSON](t, ok(t, path, "stats", "--json")); got.Total != 21 || got.Runs[flow.StatusPending] != 1 {
		t.Errorf("after retry: %+v, want a new pending run", got)
	}
}

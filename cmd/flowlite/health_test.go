package main

import (
	"strings"
	"testing"
)

// health lists the engines that run, and only counts the stopped ones
// (every short-lived process leaves one), unless --all (issue 22).
func TestHealthHidesStoppedEngines(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t) // built by an engine that stopped since
	h := decode[healthJSON](t, ok(t, path, "health", "--json"))
	if len(h.Engines) != 0 || h.StoppedHidden != 1 {
		t.Errorf("health --json: engines %+v, %d stopped hidden; want none listed, 1 hidden", h.Engines, h.StoppedHidden)
	}
	out := ok(t, path, "health")
	if !strings.Contains(out, "no engine is running\n1 stopped engine not shown (--all lists them)\n") || strings.Contains(out, "ENGINE") {
		t.Errorf("health:\n%s\nwant no engine table and the count of stopped ones", out)
	}
	all := decode[healthJSON](t, ok(t, path, "health", "--json", "--all"))
	if len(all.Engines) != 1 || all.StoppedHidden != 0 || all.Engines[0].StoppedAt == nil {
		t.Errorf("health --json --all: engines %+v, %d hidden; want the stopped engine", all.Engines, all.StoppedHidden)
	}
	if out := ok(t, path, "health", "--all"); !strings.Contains(out, "stopped") || strings.Contains(out, "not shown") {
		t.Errorf("health --all:\n%s\nwant the stopped engine's row", out)
	}
}

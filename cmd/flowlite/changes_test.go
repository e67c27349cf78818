package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// changeLines decodes the JSON lines of `changes --json`.
func changeLines(t *testing.T, out string) []flow.Change {
	t.Helper()
	var cs []flow.Change
	for line := range strings.Lines(out) {
		var c flow.Change
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		cs = append(cs, c)
	}
	return cs
}

func TestChanges(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	all := changeLines(t, ok(t, path, "changes", "--json"))
	if len(all) == 0 {
		t.Fatal("no changes in the fixture")
	}
	for i := 1; i < len(all); i++ {
		if all[i].Position <= all[i-1].Position {
			t.Fatalf("position %d follows %d", all[i].Position, all[i-1].Position)
		}
	}
	// The feed holds each run's history, in order.
	var hist []eventJSON
	if err := json.Unmarshal([]byte(ok(t, path, "history", "--json", doneRun)), &hist); err != nil {
		t.Fatal(err)
	}
	var ofRun []flow.Change
	for _, c := range all {
		if c.RunID == doneRun {
			ofRun = append(ofRun, c)
		}
	}
	if len(ofRun) != len(hist) {
		t.Fatalf("run %s: %d changes, %d history events", doneRun, len(ofRun), len(hist))
	}
	for i, ev := range hist {
		if ofRun[i].Position != ev.ID || ofRun[i].Kind != ev.Kind {
			t.Fatalf("run %s change %d: %d %s, history has %d %s", doneRun, i, ofRun[i].Position, ofRun[i].Kind, ev.ID, ev.Kind)
		}
	}
	// --after resumes after a position.
	last := all[len(all)-1].Position
	if got := changeLines(t, ok(t, path, "changes", "--json", "--after", fmt.Sprint(all[len(all)-2].Position))); len(got) != 1 || got[0].Position != last {
		t.Fatalf("changes --after the one before last: %+v", got)
	}
	// Plain lines: position, time, run, kind, step, detail.
	plain := strings.Split(strings.TrimSpace(ok(t, path, "changes")), "\n")
	if len(plain) != len(all) || !strings.HasPrefix(plain[0], fmt.Sprintf("%d\t", all[0].Position)) {
		t.Fatalf("plain output: %d lines, first %q", len(plain), plain[0])
	}

	// A consumer reads everything once, then nothing.
	if got := changeLines(t, ok(t, path, "changes", "--json", "--consumer", "audit")); len(got) != len(all) {
		t.Fatalf("consumer's first read: %d changes, want %d", len(got), len(all))
	}
	if out := ok(t, path, "changes", "--json", "--consumer", "audit"); out != "" {
		t.Fatalf("consumer's second read printed %q, want nothing", out)
	}
	var consumers []struct {
		Name     string `json:"name"`
		Position int64  `json:"position"`
	}
	if err := json.Unmarshal([]byte(ok(t, path, "changes", "--consumers", "--json")), &consumers); err != nil {
		t.Fatal(err)
	}
	if len(consumers) != 1 || consumers[0].Name != "audit" || consumers[0].Position != last {
		t.Fatalf("consumers: %+v, want audit at %d", consumers, last)
	}
	ok(t, path, "changes", "--delete", "audit")
	fails(t, exitError, `change consumer "audit": no such consumer`, "--db", path, "changes", "--delete", "audit")
	fails(t, exitUsage, "--after must not be negative", "--db", path, "changes", "--after", "-1")
}

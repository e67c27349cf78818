package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// shardSet builds a set of two shard files holding a run waiting for a
// signal in each shard, and returns the files and the runs' IDs, by shard.
func shardSet(t *testing.T) (files []string, ids []string) {
	t.Helper()
	dir := t.TempDir()
	files = []string{filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	e, err := flowsqlite.OpenShards(ctx, files, &flow.Config{PollInterval: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	waiter := flow.Workflow[string, string]{Name: "waiter", Run: func(wc flow.Context, _ string) (string, error) {
		return flow.Receive[string](wc, "go", time.Hour)
	}}
	flow.Register(e, waiter)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for shard := range 2 {
		for n := 0; ; n++ {
			if id := fmt.Sprintf("w-%d", n); e.PlaceRun(id, "") == shard {
				ids = append(ids, id)
				break
			}
		}
		if _, err := flow.Start(ctx, e, waiter, "", &flow.StartOptions{RunID: ids[shard]}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		for {
			info, err := e.Inspect(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if info.Status == flow.StatusWaiting {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	return files, ids
}

// The CLI reads and operates a shard set named by a comma-separated --db.
func TestShardSetCLI(t *testing.T) {
	t.Parallel()
	files, ids := shardSet(t)
	set := strings.Join(files, ",")

	runs := decode[[]runJSON](t, ok(t, set, "runs", "--json"))
	if len(runs) != 2 {
		t.Fatalf("runs of the set: %+v", runs)
	}
	if st := decode[statsJSON](t, ok(t, set, "stats", "--json")); st.Total != 2 || st.Runs[flow.StatusWaiting] != 2 {
		t.Errorf("stats of the set: %+v", st)
	}
	for _, id := range ids {
		if r := decode[runDetailJSON](t, ok(t, set, "show", "--json", id)); r.ID != id {
			t.Errorf("show %s: %+v", id, r)
		}
		if h := ok(t, set, "history", id); !strings.Contains(h, "signal_waiting") {
			t.Errorf("history %s:\n%s", id, h)
		}
	}
	// Operations reach the run of shard 1 and the one of shard 0.
	ok(t, set, "signal", ids[1], "go", `"now"`)
	if h := ok(t, set, "history", ids[1]); !strings.Contains(h, "signal_sent") {
		t.Errorf("history after the signal:\n%s", h)
	}
	ok(t, set, "cancel", ids[0])
	if r := decode[runDetailJSON](t, ok(t, set, "show", "--json", ids[0])); r.Status != flow.StatusCancelled {
		t.Errorf("after cancel: %s", r.Status)
	}
	fails(t, exitError, "run nope: not found", "--db", set, "cancel", "nope")

	// Not the set: refused, nothing changed.
	fails(t, exitError, "shard set mismatch", "--db", files[1]+","+files[0], "runs")
	fails(t, exitError, "shard 1 of a set of 2", "--db", files[1], "cancel", ids[1])
	fails(t, exitUsage, "empty file name", "--db", files[0]+",", "runs")
	fails(t, exitUsage, "migrate works on one file", "--db", set, "migrate", "status")
	ok(t, files[1], "migrate", "status")

	// One feed per file.
	fails(t, exitUsage, "pass --shard 0 to 1", "--db", set, "changes")
	if out := ok(t, set, "changes", "--shard", "1"); !strings.Contains(out, ids[1]) || strings.Contains(out, ids[0]) {
		t.Errorf("changes of shard 1:\n%s", out)
	}

	if h := decode[healthJSON](t, ok(t, set, "health", "--json")); len(h.Shards) != 2 || h.Shards[1].Path != files[1] {
		t.Errorf("health of the set: %+v", h)
	}
	ok(t, set, "checkpoint")

	// A backup of a set is a set.
	dir := t.TempDir()
	copies := filepath.Join(dir, "a.db") + "," + filepath.Join(dir, "b.db")
	fails(t, exitUsage, "pass 2 comma-separated destinations", "--db", set, "backup", filepath.Join(dir, "one.db"))
	ok(t, set, "backup", copies)
	if runs := decode[[]runJSON](t, ok(t, copies, "runs", "--json")); len(runs) != 2 {
		t.Errorf("runs of the backup: %+v", runs)
	}
}

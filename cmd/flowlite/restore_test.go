package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowlitestream"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// TestRestoreReplica replicates a file from an engine, then restores the
// replica with restore: as it is now (every run), and as it was before the
// second batch of runs (--at, point in time: the first batch only). health
// on the engine's file says Litestream checkpoints and names the replica,
// from the status the engine left beside the file.
func TestRestoreReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path, replica := filepath.Join(dir, "app.db"), filepath.Join(dir, "replica")
	quiet := slog.New(slog.DiscardHandler)
	e, err := flowsqlite.Open(ctx, path, &flow.Config{Logger: quiet},
		&flowsqlite.Options{Replication: &flowlitestream.Replication{URL: replica, SyncInterval: 100 * time.Millisecond, Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	job := flow.Job[int]{Name: "restore_noop", Handler: func(context.Context, int) error { return nil }}
	flow.RegisterJob(e, job)
	enqueue := func(prefix string) {
		for i := range 5 {
			if _, err := flow.Enqueue(ctx, e, job, i, &flow.EnqueueOptions{RunID: prefix + string(rune('0'+i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	enqueue("first-")
	time.Sleep(1100 * time.Millisecond) // uploaded, and a clear second apart
	between := time.Now()
	time.Sleep(1100 * time.Millisecond)
	enqueue("second-")
	time.Sleep(300 * time.Millisecond) // the status file is written every second
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	var h healthJSON
	if err := json.Unmarshal([]byte(ok(t, path, "health", "--json")), &h); err != nil {
		t.Fatal(err)
	}
	if h.Checkpointer != "litestream" || h.Replication == nil || h.Replication.Replica != replica || h.Replication.InProcess {
		t.Errorf("health: checkpointer %q, replication %+v", h.Checkpointer, h.Replication)
	}
	if text := ok(t, path, "health"); !strings.Contains(text, "Litestream") || !strings.Contains(text, replica) {
		t.Errorf("health does not say Litestream checkpoints to %s:\n%s", replica, text)
	}

	latest, earlier := filepath.Join(dir, "latest.db"), filepath.Join(dir, "earlier.db")
	if r := flowlite(t, nil, "restore", "--replica", replica, latest); r.code != exitOK {
		t.Fatalf("restore: exit %d: %s", r.code, r.stderr)
	}
	if r := flowlite(t, nil, "restore", "--replica", replica, "--at", between.Format(time.RFC3339Nano), earlier); r.code != exitOK {
		t.Fatalf("restore --at: exit %d: %s", r.code, r.stderr)
	}
	if r := flowlite(t, nil, "restore", "--replica", replica, latest); r.code != exitError || !strings.Contains(r.stderr, "exists") {
		t.Errorf("restore over an existing file: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, tc := range []struct {
		file          string
		first, second bool
	}{{latest, true, true}, {earlier, true, false}} {
		runs := ok(t, tc.file, "runs")
		for prefix, want := range map[string]bool{"first-": tc.first, "second-": tc.second} {
			if got := strings.Contains(runs, prefix); got != want {
				t.Errorf("%s: runs %s* there: %v, want %v\n%s", filepath.Base(tc.file), prefix, got, want, runs)
			}
		}
	}
}

package flowlitestream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/file"
	"github.com/superfly/ltx"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowlitestream"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// quietLog drops Litestream's info lines.
var quietLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

var noopJob = flow.Job[int]{Name: "noop", Handler: func(context.Context, int) error { return nil }}

// TestReplicationRestores enqueues runs on an engine that replicates its
// file to a directory, closes it (which uploads the rest), restores the
// replica to a new file and finds every run there; its health says that
// Litestream checkpoints and that the replica is in sync, and flowlite's
// own checkpoints are refused.
func TestReplicationRestores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path, replica := filepath.Join(dir, "app.db"), filepath.Join(dir, "replica")
	opts := &flowsqlite.Options{Replication: &flowlitestream.Replication{URL: replica, SyncInterval: 100 * time.Millisecond, Logger: quietLog}}
	e, err := flowsqlite.Open(ctx, path, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	flow.RegisterJob(e, noopJob)
	var ids []string
	for i := range 50 {
		r, err := flow.Enqueue(ctx, e, noopJob, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID())
	}
	deadline := time.Now().Add(5 * time.Second)
	var h flow.FileHealth
	for {
		if h, err = e.FileHealth(ctx); err != nil {
			t.Fatal(err)
		}
		if r := h.Replication; r != nil && r.LocalTXID > 0 && r.ReplicaTXID >= r.LocalTXID && !r.LastSync.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not catch up within 5s: %+v", h.Replication)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if h.Checkpointer != flowsqlite.CheckpointerLitestream || !h.Replication.InProcess || h.Replication.Replica != replica {
		t.Errorf("health: checkpointer %q, replication %+v", h.Checkpointer, h.Replication)
	}
	if _, err := e.Checkpoint(ctx, flowsqlite.CheckpointTruncate); err == nil {
		t.Error("a checkpoint of flowlite's ran on a file Litestream replicates")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	restored := filepath.Join(dir, "restored.db")
	if err := flowlitestream.Restore(ctx, replica, restored, nil); err != nil {
		t.Fatal(err)
	}
	if err := flowlitestream.Restore(ctx, replica, restored, nil); !errors.Is(err, fs.ErrExist) {
		t.Errorf("restore over an existing file: %v, want fs.ErrExist", err)
	}
	r, err := flowsqlite.OpenReadOnly(ctx, restored, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, id := range ids {
		if _, err := r.Inspect(ctx, id); err != nil {
			t.Errorf("run %s after restore: %v", id, err)
		}
	}
}

// TestLitestreamDirectoryLeavesCheckpoints: with Litestream's directory
// beside the file, a started engine runs no checkpoint of its own and says
// Litestream checkpoints; CheckpointsByEngine overrides the detection.
func TestLitestreamDirectoryLeavesCheckpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		by   flowsqlite.Checkpoints
		want flowsqlite.Checkpointer
	}{
		{flowsqlite.CheckpointsAuto, flowsqlite.CheckpointerLitestream},
		{flowsqlite.CheckpointsByLitestream, flowsqlite.CheckpointerLitestream},
		{flowsqlite.CheckpointsByEngine, flowsqlite.CheckpointerEngine},
	} {
		t.Run(fmt.Sprintf("checkpoints=%q", tc.by), func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "app.db")
			if tc.by != flowsqlite.CheckpointsByLitestream {
				if err := os.Mkdir(flowsqlite.LitestreamDir(path), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			e, err := flowsqlite.Open(ctx, path, &flow.Config{Logger: quietLog},
				&flowsqlite.Options{Checkpoints: tc.by, CheckpointInterval: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			flow.RegisterJob(e, noopJob)
			if err := e.Start(ctx); err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				if _, err := flow.Enqueue(ctx, e, noopJob, i, nil); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(300 * time.Millisecond) // some 30 routine checkpoint intervals
			h, err := e.FileHealth(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if h.Checkpointer != tc.want {
				t.Errorf("checkpointer %q, want %q", h.Checkpointer, tc.want)
			}
			if ran := h.Checkpoints > 0; ran != (tc.want == flowsqlite.CheckpointerEngine) {
				t.Errorf("the engine ran %d checkpoints with checkpointer %q", h.Checkpoints, h.Checkpointer)
			}
		})
	}
}

// failingClient is a file replica that refuses every upload.
type failingClient struct{ litestream.ReplicaClient }

func (failingClient) WriteLTXFile(context.Context, int, ltx.TXID, ltx.TXID, io.Reader) (*ltx.FileInfo, error) {
	return nil, errors.New("replica unreachable")
}

// lockedBuffer is a log destination several goroutines write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestReplicaFallingBehind: a replica that refuses uploads falls behind;
// the engine logs it and FileHealth shows the lag and the errors.
func TestReplicaFallingBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := &flowsqlite.Options{Replication: &flowlitestream.Replication{
		Client: func(path string) (litestream.ReplicaClient, error) {
			return failingClient{file.NewReplicaClient(filepath.Join(dir, "replica"))}, nil
		},
		SyncInterval: 50 * time.Millisecond, Logger: log,
	}}
	e, err := flowsqlite.Open(ctx, filepath.Join(dir, "app.db"), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	flow.RegisterJob(e, noopJob)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "replica falling behind") {
		if _, err := flow.Enqueue(ctx, e, noopJob, 1, nil); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no warning of a replica falling behind after 10s; logs:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	h, err := e.FileHealth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := h.Replication
	if r == nil || r.Lag < time.Second || r.Errors == 0 || !strings.Contains(r.LastError, "replica unreachable") || !r.LastSync.IsZero() {
		t.Errorf("health of a replica that refuses uploads: %+v", r)
	}
}

// TestShardsReplicateEveryFile: each file of a shard set replicates to its
// own replica under the set's, and restores from it.
func TestShardsReplicateEveryFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	paths := []string{filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")}
	replica := filepath.Join(dir, "replica")
	e, err := flowsqlite.OpenShards(ctx, paths, nil,
		&flowsqlite.Options{Replication: &flowlitestream.Replication{URL: replica, SyncInterval: 100 * time.Millisecond, Logger: quietLog}})
	if err != nil {
		t.Fatal(err)
	}
	flow.RegisterJob(e, noopJob)
	var ids []string
	for i := range 40 {
		r, err := flow.Enqueue(ctx, e, noopJob, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID())
	}
	for i := range e.Shards() {
		h, err := e.Shard(i).FileHealth(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(replica, filepath.Base(paths[i])); h.Replication == nil || h.Replication.Replica != want {
			t.Errorf("shard %d replication %+v, want replica %s", i, h.Replication, want)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	restoredDir := filepath.Join(dir, "restored")
	if err := os.Mkdir(restoredDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var restored []string
	for _, p := range paths {
		dst := filepath.Join(restoredDir, filepath.Base(p))
		if err := flowlitestream.Restore(ctx, filepath.Join(replica, filepath.Base(p)), dst, nil); err != nil {
			t.Fatal(err)
		}
		restored = append(restored, dst)
	}
	r, err := flowsqlite.OpenShardsReadOnly(ctx, restored, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, id := range ids {
		if _, err := r.Inspect(ctx, id); err != nil {
			t.Errorf("run %s after restoring the set: %v", id, err)
		}
	}
}

// An engine closed before Litestream's first sync (its monitor copies the
// WAL every quarter of the sync interval) still leaves every commit on the
// replica: Close uploads them.
func TestCloseBeforeTheFirstSyncUploads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path, replica := filepath.Join(dir, "app.db"), filepath.Join(dir, "replica")
	e, err := flowsqlite.Open(ctx, path, nil,
		&flowsqlite.Options{Replication: &flowlitestream.Replication{URL: replica, SyncInterval: time.Hour, Logger: quietLog}})
	if err != nil {
		t.Fatal(err)
	}
	flow.RegisterJob(e, noopJob)
	r, err := flow.Enqueue(ctx, e, noopJob, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "restored.db")
	if err := flowlitestream.Restore(ctx, replica, dst, nil); err != nil {
		t.Fatal(err)
	}
	back, err := flowsqlite.OpenReadOnly(ctx, dst, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if _, err := back.Inspect(ctx, r.ID()); err != nil {
		t.Errorf("the run enqueued before Close: %v", err)
	}
}

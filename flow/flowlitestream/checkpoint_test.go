package flowlitestream_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowlitestream"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// TestCheckpointsKeepUpWithABusyWriter: 16 callers keep the engine's writer
// busy for two seconds while the engine works their jobs. Litestream's own
// checkpoints could not get SQLite's write lock from such a writer, and
// its WAL grew past any limit (270 MB in 8 s against a 64 MiB WALLimit);
// checkpoints at the engine's pace, with the writer held, keep the WAL
// file within WALLimit. FileHealth counts them as Litestream's, and the
// replica restores every run.
func TestCheckpointsKeepUpWithABusyWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path, replica := filepath.Join(dir, "busy.db"), filepath.Join(dir, "replica")
	const walLimit = 8 << 20
	e, err := flowsqlite.Open(ctx, path, &flow.Config{Logger: quietLog}, &flowsqlite.Options{
		WALLimit: walLimit, CheckpointInterval: 200 * time.Millisecond,
		Replication: &flowlitestream.Replication{URL: replica, SyncInterval: 200 * time.Millisecond, Logger: quietLog},
	})
	if err != nil {
		t.Fatal(err)
	}
	flow.RegisterJob(e, noopJob)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}

	var peak, enqueued atomic.Int64
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if info, err := os.Stat(path + "-wal"); err == nil && info.Size() > peak.Load() {
				peak.Store(info.Size())
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	ids := make([][]string, 16)
	var g errgroup.Group
	deadline := time.Now().Add(2 * time.Second)
	for p := range ids {
		g.Go(func() error {
			for i := 0; time.Now().Before(deadline); i++ {
				r, err := flow.Enqueue(ctx, e, noopJob, i, nil)
				if err != nil {
					return err
				}
				ids[p] = append(ids[p], r.ID())
				enqueued.Add(1)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-watched
	h, err := e.FileHealth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d runs enqueued in 2s; WAL file peaked at %d bytes (limit %d); %d checkpoints, the last %s",
		enqueued.Load(), peak.Load(), walLimit, h.Checkpoints, h.LastCheckpointMode)
	if peak.Load() > walLimit {
		t.Errorf("the WAL file grew to %d bytes, past its WALLimit of %d", peak.Load(), walLimit)
	}
	if h.Checkpointer != flowsqlite.CheckpointerLitestream || h.Checkpoints == 0 ||
		h.LastCheckpointBy != string(flowsqlite.CheckpointerLitestream) || h.LastCheckpointError != "" ||
		h.Replication == nil || h.Replication.Checkpoints == 0 {
		t.Errorf("health: checkpointer %q, %d checkpoints, the last by %q (error %q); replication %+v",
			h.Checkpointer, h.Checkpoints, h.LastCheckpointBy, h.LastCheckpointError, h.Replication)
	}

	restored := filepath.Join(dir, "restored.db")
	if err := flowlitestream.Restore(ctx, replica, restored, nil); err != nil {
		t.Fatal(err)
	}
	r, err := flowsqlite.OpenReadOnly(ctx, restored, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, caller := range ids {
		for _, id := range caller {
			if _, err := r.Inspect(ctx, id); err != nil {
				t.Fatalf("run %s after restore: %v", id, err)
			}
		}
	}
}

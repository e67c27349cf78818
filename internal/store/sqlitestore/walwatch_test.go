package sqlitestore_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// maintain runs the store's upkeep, as a started engine does, until the
// test ends; idle is what the engine would report of its runs in flight.
// The upkeep's warnings go to the test's output.
func maintain(t *testing.T, s *sqlitestore.Store, idle bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		s.Maintain(ctx, store.MaintainHooks{
			Owner: "w1", Now: time.Now, Idle: func() bool { return idle },
			Log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
	})
	// Registered after openStore's Close, so it runs first.
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// eventually polls cond until it holds, failing the test after a while.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An idle store truncates the WAL by itself.
func TestIdleStoreTruncatesWAL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t, filepath.Join(t.TempDir(), "flowlite.db"), sqlitestore.Options{CheckpointInterval: 20 * time.Millisecond})
	if err := s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, "r1") }); err != nil {
		t.Fatal(err)
	}
	if h, err := s.FileHealth(ctx); err != nil || h.WALBytes == 0 {
		t.Fatalf("after a write: %+v, %v; want a WAL to truncate", h, err)
	}
	maintain(t, s, true)
	eventually(t, "an idle truncate", func() bool {
		h, err := s.FileHealth(ctx)
		return err == nil && h.WALBytes == 0 && h.LastCheckpointMode == flowtype.CheckpointTruncate
	})
}

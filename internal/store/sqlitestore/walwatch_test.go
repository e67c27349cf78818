package sqlitestore_test

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

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

// walLoad describes a write load with readers that starve checkpoints.
type walLoad struct {
	readers int           // goroutines looping on read transactions
	readFor time.Duration // how long each read transaction stays open
	runFor  time.Duration // how long the load lasts at least
	// enough reports, after runFor, whether the load did its job; the load
	// goes on until it does, for at most two minutes more.
	enough func(s *sqlitestore.Store, peak int64) bool
}

// run writes runs flat out through a store opened with opts, its upkeep
// running, while the readers keep overlapping read transactions open on
// their own pool (staggered, so one is always open), and returns the
// store, the largest WAL size seen and the number of runs written.
func (l walLoad) run(t *testing.T, opts sqlitestore.Options) (s *sqlitestore.Store, peak, runs int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), l.runFor+3*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "flowlite.db")
	s = openStore(t, path, opts)
	maintain(t, s, false)
	input := []byte(`"` + strings.Repeat("x", 8<<10) + `"`) // large, so the WAL grows fast even under -race

	db := openDSN(t, path, "")
	db.SetMaxOpenConns(l.readers)
	stop := make(chan struct{})
	var stopOnce sync.Once
	stopLoad := func() { stopOnce.Do(func() { close(stop) }) }
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var g errgroup.Group
	var peakWAL atomic.Int64
	start := time.Now()
	g.Go(func() error { // the sampler, which also ends the load
		for i := 0; !stopped(); i++ {
			if info, err := os.Stat(path + "-wal"); err == nil {
				peakWAL.Store(max(peakWAL.Load(), info.Size()))
			}
			if elapsed := time.Since(start); elapsed >= l.runFor && i%25 == 0 &&
				(l.enough(s, peakWAL.Load()) || elapsed >= l.runFor+2*time.Minute) {
				stopLoad()
			}
			time.Sleep(2 * time.Millisecond)
		}
		return nil
	})
	for i := range l.readers {
		g.Go(func() error {
			time.Sleep(time.Duration(i) * l.readFor / time.Duration(l.readers))
			for !stopped() {
				// ReadOnly: a plain BEGIN, not the DSN's BEGIN IMMEDIATE.
				tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
				if err != nil {
					return err
				}
				var n int
				if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM flowlite_runs").Scan(&n); err != nil {
					tx.Rollback()
					return err
				}
				time.Sleep(l.readFor)
				if err := tx.Rollback(); err != nil {
					return err
				}
			}
			return nil
		})
	}
	var written atomic.Int64
	for w := range 8 { // writers, each a caller of its own
		g.Go(func() error {
			for i := 0; !stopped(); i++ {
				err := s.Write(ctx, func(tx store.Tx) error {
					ok, err := tx.RunInsert(ctx, store.RunInsertParams{
						ID: fmt.Sprintf("w%d-%d", w, i), Workflow: flowtype.WorkflowKey{Name: "wal-writer", Version: 1},
						Queue: "q", Input: input, RunAt: base, Now: base,
					})
					if err == nil && !ok {
						err = fmt.Errorf("run w%d-%d already exists", w, i)
					}
					return err
				})
				if err != nil {
					return err
				}
				written.Add(1)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return s, peakWAL.Load(), written.Load()
}

// Readers that always hold a read transaction starve SQLite's automatic
// checkpoints, and the WAL grows without bound; the store's WAL watch
// keeps it under WALLimit anyway (reliability pitfall 3 and B7).
//
// By default: one reader with 40 ms transactions and an 8 MiB limit, for 5 s
// and at least until the watch truncated the WAL three times. With
// FLOWLITE_LONG=1, 60 s, and also B7's shape: four readers with overlapping
// 100 ms transactions and the default 64 MiB limit, for 60 s.
func TestWALStaysBoundedUnderConstantReaders(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	t.Parallel()
	cases := []struct {
		name  string
		load  walLoad
		limit int64 // 0: the default
	}{
		{"OneReader", walLoad{readers: 1, readFor: 40 * time.Millisecond, runFor: 5 * time.Second}, 8 << 20},
	}
	if os.Getenv("FLOWLITE_LONG") == "1" {
		cases[0].load.runFor = time.Minute
		cases = append(cases, struct {
			name  string
			load  walLoad
			limit int64
		}{"B7FourReaders", walLoad{readers: 4, readFor: 100 * time.Millisecond, runFor: time.Minute}, 0})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := sqlitestore.Options{WALLimit: c.limit}
			limit := cmp.Or(c.limit, sqlitestore.DefaultWALLimit)

			// The premise: without the watch, the WAL passes the limit.
			control := c.load
			control.runFor = 0
			control.enough = func(_ *sqlitestore.Store, peak int64) bool { return peak >= limit }
			ctlOpts := opts
			ctlOpts.CheckpointInterval = -1
			ctlStart := time.Now()
			_, ctlPeak, _ := control.run(t, ctlOpts)
			t.Logf("without the WAL watch, the WAL reached %.2f MiB in %v", float64(ctlPeak)/(1<<20), time.Since(ctlStart).Round(time.Millisecond))
			if ctlPeak < limit {
				t.Fatalf("without the WAL watch the WAL reached only %d bytes: the load does not starve checkpoints", ctlPeak)
			}

			load := c.load
			load.enough = func(s *sqlitestore.Store, _ int64) bool {
				h, err := s.FileHealth(context.Background())
				return err == nil && h.Forced >= 3
			}
			s, peak, runs := load.run(t, opts)
			h, err := s.FileHealth(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s, %d readers × %s: %d runs written, WAL peak %.2f MiB (limit %d MiB), %d checkpoints (%d forced)",
				c.load.runFor, c.load.readers, c.load.readFor, runs, float64(peak)/(1<<20), limit>>20, h.Checkpoints, h.Forced)
			if peak >= limit {
				t.Errorf("WAL reached %d bytes, limit %d", peak, limit)
			}
			if h.Checkpoints == 0 || h.Forced == 0 || h.LastCheckpoint.IsZero() {
				t.Errorf("file health %+v: want checkpoints, some forced by the WAL size", h)
			}
			if h.LastCheckpointError != "" {
				t.Errorf("last checkpoint failed: %s", h.LastCheckpointError)
			}
		})
	}
}

package flowlitestream_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowlitestream"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

func TestScratchWAL(t *testing.T) {
	for _, rep := range []bool{false, true} {
		ctx := context.Background()
		dir := t.TempDir()
		var opts *flowsqlite.Options
		if rep {
			opts = &flowsqlite.Options{Replication: &flowlitestream.Replication{URL: filepath.Join(dir, "replica"), Logger: quietLog}}
		}
		path := filepath.Join(dir, "enqueue.db")
		e, err := flowsqlite.Open(ctx, path, &flow.Config{Logger: quietLog}, opts)
		if err != nil {
			t.Fatal(err)
		}
		flow.RegisterJob(e, noopJob)
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-done:
					return
				case <-time.After(500 * time.Millisecond):
				}
				fi, _ := os.Stat(path + "-wal")
				if fi != nil {
					t.Logf("rep=%v wal=%d", rep, fi.Size())
				}
			}
		}()
		start := time.Now()
		n := 0
		for time.Since(start) < 6*time.Second {
			if _, err := flow.Enqueue(ctx, e, noopJob, n, nil); err != nil {
				t.Fatal(err)
			}
			n++
		}
		t.Logf("rep=%v %.0f jobs/s", rep, float64(n)/time.Since(start).Seconds())
		done <- struct{}{}
		e.Stop(ctx)
		e.Close()
	}
}

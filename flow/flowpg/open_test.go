package flowpg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
)

// TestWorkersStartingTogether: eight processes' engines opening one schema
// at once, as the workers of a deployment do when they start together,
// each open within a bound well under the 5 seconds one of them used to
// wait: first on a schema that does not exist yet, which one of them
// migrates while the others wait for its lock, then on the current
// schema, which takes no lock. Each engine then runs a workflow.
func TestWorkersStartingTogether(t *testing.T) {
	t.Parallel()
	dsn, s := schema(t)
	const workers = 8
	for _, c := range []struct {
		what  string
		limit time.Duration
	}{
		{"fresh schema", 4 * time.Second},
		{"current schema", 2 * time.Second},
	} {
		took := make([]time.Duration, workers)
		engines := make([]*flow.Engine, workers)
		var g errgroup.Group
		for i := range workers {
			g.Go(func() error {
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				start := time.Now()
				e, err := flowpg.Open(ctx, dsn, &flow.Config{PollInterval: 10 * time.Millisecond}, &flowpg.Options{Schema: s, MaxConns: 2})
				took[i] = time.Since(start)
				if err != nil {
					return fmt.Errorf("open %d of %d on a %s after %v: %w", i+1, workers, c.what, took[i], err)
				}
				engines[i] = e
				return nil
			})
		}
		err := g.Wait()
		t.Logf("%s: opens took %v", c.what, took)
		for i, e := range engines {
			if e == nil {
				continue
			}
			if err == nil && i == 0 {
				runTwice(t, e)
			}
			if err := e.Close(); err != nil {
				t.Error(err)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range took {
			if d > c.limit {
				t.Errorf("open %d of a %s took %v, want under %v", i+1, c.what, d, c.limit)
			}
		}
	}
}

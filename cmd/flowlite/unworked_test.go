package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// health names the queues whose pending runs no live engine works: the
// fixture's pending run waits in queue "batch", which the engine that
// built it (stopped since) never worked. An engine working "batch" hides
// it while it runs.
func TestHealthNamesUnworkedQueues(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	h := decode[healthJSON](t, ok(t, path, "health", "--json", "--all"))
	if len(h.UnworkedQueues) != 1 || h.UnworkedQueues[0].Queue != "batch" || h.UnworkedQueues[0].Pending != 1 ||
		h.UnworkedQueues[0].OldestAgeSecs <= 0 {
		t.Fatalf("unworked_queues = %+v, want batch with 1 pending run", h.UnworkedQueues)
	}
	if fx := h.Engines[0]; !slices.Equal(fx.Queues, []string{flow.DefaultQueue}) || fx.Live || fx.StoppedAt == nil {
		t.Errorf("the fixture's engine: queues %q, live %v, stopped at %v; want [default], stopped", fx.Queues, fx.Live, fx.StoppedAt)
	}
	out := ok(t, path, "health")
	if !strings.Contains(out, "no live engine works") {
		t.Errorf("health lacks the unworked-queue notice:\n%s", out)
	}
	if got := rowOf(t, out, "batch"); len(got) != 3 || got[1] != "1" {
		t.Errorf("health row of queue batch: %q, want [batch 1 AGE]", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e, err := flowsqlite.Open(ctx, path, &flow.Config{Queues: map[string]flow.QueueConfig{"batch": {}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Start(ctx); err != nil { // lacks the run's workflow: the run stays pending
		t.Fatal(err)
	}
	h = decode[healthJSON](t, ok(t, path, "health", "--json"))
	if len(h.UnworkedQueues) != 0 {
		t.Errorf("unworked_queues with an engine working batch = %+v, want none", h.UnworkedQueues)
	}
	if out := ok(t, path, "health"); strings.Contains(out, "no live engine works") {
		t.Errorf("health names unworked queues while batch is worked:\n%s", out)
	}
	var live bool
	for _, eng := range h.Engines {
		live = live || eng.Live && slices.Equal(eng.Queues, []string{"batch"}) && eng.StoppedAt == nil
	}
	if !live {
		t.Errorf("engines %+v: want a live one working batch", h.Engines)
	}
}

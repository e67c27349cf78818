package engine

import (
	"context"
	"testing"
	"time"
)

// A unique period needs a key; the key's holder is returned whatever the
// options of the later start.
func TestStartUniqueValidation(t *testing.T) {
	t.Parallel()
	e, _, _ := newQueueEngine(t)
	ctx := context.Background()
	for _, p := range []StartParams{
		{Workflow: jobKey, UniquePeriod: time.Minute},
		{Workflow: jobKey, UniqueKey: "k", UniquePeriod: -time.Minute},
	} {
		if _, err := e.StartRun(ctx, p); err == nil {
			t.Errorf("start with %+v succeeded", p)
		}
	}
	first, err := e.StartRun(ctx, StartParams{Workflow: jobKey, Input: []byte(`{}`), UniqueKey: "k", UniquePeriod: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.StartRun(ctx, StartParams{Workflow: jobKey, Input: []byte(`{}`), UniqueKey: "k", Queue: "other", Priority: 9})
	if err != nil || !again.Existing || again.Run.ID != first.Run.ID || again.Run.Queue != "default" {
		t.Errorf("second start: %+v, %v; want the first run, unchanged", again, err)
	}
}

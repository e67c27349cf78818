package flow_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// orderWorkflow publishes "paid", waits for a "ship" signal (so a client
// reads the value while the run is waiting, and the body is replayed after
// the signal), then publishes "shipped".
var orderWorkflow = flow.Workflow[string, string]{
	Name: "publish_order",
	Run: func(wc flow.Context, id string) (string, error) {
		if err := flow.Publish(wc, "", "lost"); err == nil || !strings.Contains(err.Error(), "empty key") {
			return "", fmt.Errorf("publish with an empty key: err = %v, want empty key", err)
		}
		if err := flow.Publish(wc, "status", "paid"); err != nil {
			return "", err
		}
		if _, err := flow.Receive[string](wc, "ship", 0); err != nil {
			return "", err
		}
		if err := flow.Publish(wc, "status", "shipped"); err != nil {
			return "", err
		}
		return id, nil
	},
}

// A client waits for a value a run publishes, reads the latest one, and a
// replay of the body does not publish again.
func TestPublishedValuesAreReadAndWaitedFor(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	flow.Register(e, orderWorkflow)
	startEngine(t, e)

	run, err := flow.Start(ctx, e, orderWorkflow, "order-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := flow.WaitPublished[string](ctx, e, run.ID(), "status")
	if err != nil || got != "paid" {
		t.Fatalf("WaitPublished = %q, %v; want paid", got, err)
	}
	if _, err := flow.GetPublished[string](ctx, e, run.ID(), "other"); !errors.Is(err, flow.ErrNotPublished) {
		t.Fatalf("GetPublished of an unpublished key: err = %v, want ErrNotPublished", err)
	}
	if _, err := flow.GetPublished[int](ctx, e, run.ID(), "status"); err == nil {
		t.Fatal("GetPublished as int of a string: no decode error")
	}
	if _, err := flow.Signal(ctx, e, run.ID(), "ship", "now", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = flow.GetPublished[string](ctx, e, run.ID(), "status")
	if err != nil || got != "shipped" {
		t.Fatalf("GetPublished after the run = %q, %v; want shipped", got, err)
	}
	info, err := e.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, st := range info.Steps {
		if strings.HasPrefix(st.Name, flow.PublishStepPrefix) {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d publish steps recorded, want 2 (a replay published again?): %+v", n, info.Steps)
	}
	if p := flow.Published(info); string(p["status"]) != `"shipped"` || len(p) != 1 {
		t.Fatalf("Published = %q, want status \"shipped\" only", p)
	}
	_, err = flow.WaitPublished[string](ctx, e, run.ID(), "never")
	if !errors.Is(err, flow.ErrNotPublished) {
		t.Fatalf("WaitPublished of a finished run's unpublished key: err = %v, want ErrNotPublished", err)
	}
}

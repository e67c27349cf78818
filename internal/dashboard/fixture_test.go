package dashboard

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// Run IDs of the fixture database.
const (
	doneRun    = "done-1"    // completed
	sagaRun    = "saga-1"    // failed: rolled back by its compensations
	stuckRun   = "stuck-1"   // suspended: a compensation failed for good
	pendingRun = "pending-1" // pending in queue "batch"; no engine ever ran it
)

type order struct {
	Item string `json:"item"`
}

var (
	reserve = flow.Step[order, string]{
		Name: "reserve",
		Run: func(_ context.Context, o order) (string, error) {
			time.Sleep(3 * time.Millisecond)
			return "res-" + o.Item, nil
		},
		Compensate: func(context.Context, order, string) error { time.Sleep(2 * time.Millisecond); return nil },
	}
	reserveStuck = flow.Step[order, string]{
		Name: "reserve",
		Run:  func(_ context.Context, o order) (string, error) { return "res-" + o.Item, nil },
		Compensate: func(context.Context, order, string) error {
			return flow.Permanent(errors.New("warehouse unreachable"))
		},
	}
	ship = flow.Step[string, string]{
		Name: "ship",
		Run: func(_ context.Context, r string) (string, error) {
			time.Sleep(5 * time.Millisecond)
			return "shipped-" + r, nil
		},
	}
	charge = flow.Step[order, int]{
		Name: "charge",
		Run: func(context.Context, order) (int, error) {
			time.Sleep(2 * time.Millisecond)
			return 0, flow.Permanent(errors.New("card declined"))
		},
	}

	doneWF = flow.Workflow[order, string]{Name: "ship_order", Run: func(wc flow.Context, o order) (string, error) {
		r, err := flow.Do(wc, reserve, o)
		if err != nil {
			return "", err
		}
		return flow.Do(wc, ship, r)
	}}
	sagaWF = flow.Workflow[order, int]{Name: "pay_order", Version: 2, Run: func(wc flow.Context, o order) (int, error) {
		if _, err := flow.Do(wc, reserve, o); err != nil {
			return 0, err
		}
		if _, err := flow.Do(wc, ship, "x"); err != nil {
			return 0, err
		}
		return flow.Do(wc, charge, o)
	}}
	stuckWF = flow.Workflow[order, int]{Name: "stuck_order", Run: func(wc flow.Context, o order) (int, error) {
		if _, err := flow.Do(wc, reserveStuck, o); err != nil {
			return 0, err
		}
		return flow.Do(wc, charge, o)
	}}
	laterWF = flow.Workflow[order, string]{Name: "later_order", Run: doneWF.Run}
)

// fixture builds a database holding doneRun, sagaRun, stuckRun and
// pendingRun, closes every engine on it, and returns its path.
func fixture(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "flow.db")
	cfg := &flow.Config{
		PollInterval: 5 * time.Millisecond,
		DefaultRetry: flow.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond},
	}
	e, err := flow.Open(ctx, path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	flow.Register(e, doneWF)
	flow.Register(e, sagaWF)
	flow.Register(e, stuckWF)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done, err := flow.Start(ctx, e, doneWF, order{Item: "book"}, &flow.StartOptions{RunID: doneRun})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := done.Result(ctx); err != nil {
		t.Fatalf("%s: %v", doneRun, err)
	}
	saga, err := flow.Start(ctx, e, sagaWF, order{Item: "lamp"}, &flow.StartOptions{RunID: sagaRun})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := saga.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("%s: error %v, want rolled back", sagaRun, err)
	}
	stuck, err := flow.Start(ctx, e, stuckWF, order{Item: "sofa"}, &flow.StartOptions{RunID: stuckRun})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stuck.Result(ctx); !errors.Is(err, flow.ErrSuspended) {
		t.Fatalf("%s: error %v, want suspended", stuckRun, err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e, err = flow.Open(ctx, path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	flow.Register(e, laterWF)
	if _, err := flow.Start(ctx, e, laterWF, order{Item: "desk"}, &flow.StartOptions{RunID: pendingRun, Queue: "batch", Priority: 3}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// server opens the fixture database with an engine that is never started
// and serves its dashboard.
func server(t testing.TB, path string, opts *Options) (*httptest.Server, *flow.Engine) {
	t.Helper()
	e, err := flow.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(e, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	t.Cleanup(func() {
		srv.Close()
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return srv, e
}

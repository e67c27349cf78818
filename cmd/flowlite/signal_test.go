package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// approval is what the decide workflow receives.
type approval struct {
	Approved bool `json:"approved"`
}

// decide waits for the signal "decision" and returns 1 when it approved.
var decide = flow.Workflow[int, int]{Name: "decide", Version: 1, Run: func(wc flow.Context, _ int) (int, error) {
	d, err := flow.Receive[approval](wc, "decision", time.Hour)
	if err != nil || !d.Approved {
		return 0, err
	}
	return 1, nil
}}

// awaitWaiting starts a run of decide on e and returns its ID once it waits.
func awaitWaiting(t *testing.T, ctx context.Context, e *flow.Engine) string {
	t.Helper()
	r, err := flow.Start(ctx, e, decide, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := e.Inspect(ctx, r.ID())
		if err != nil {
			t.Fatal(err)
		}
		if info.Status == flow.StatusWaiting {
			return r.ID()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s never waited: %s", r.ID(), info.Status)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// checkSignalVerdicts sends to a run that waits for "decision", worked by
// an engine in this process: a payload it rejects is reported with exit
// code 1 and the run still waits; one with a field the type lacks is
// received. Before, both printed "sent" (issue 22).
func checkSignalVerdicts(t *testing.T, ctx context.Context, e *flow.Engine, db []string) {
	t.Helper()
	id := awaitWaiting(t, ctx, e)
	r := fails(t, exitError, `rejected: decode into main.approval`, append(db, "signal", id, "decision", `{"approved":"yes"}`)...)
	if !strings.Contains(r.stderr, "the run still waits for decision") {
		t.Errorf("stderr %q does not say the run still waits", r.stderr)
	}
	if info, err := e.Inspect(ctx, id); err != nil || info.Status != flow.StatusWaiting {
		t.Fatalf("after the rejection: %+v, %v; want waiting", info.Status, err)
	}
	out := flowlite(t, nil, append(db, "signal", id, "decision", `{"approved":true,"by":"dana"}`)...)
	if out.code != exitOK || !strings.HasPrefix(out.stdout, "signal decision sent to run "+id+" and received") {
		t.Fatalf("signal with an added field: exit %d, stdout %q, stderr %q", out.code, out.stdout, out.stderr)
	}
	run, err := flow.Lookup(ctx, e, decide, id)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := run.Result(ctx); err != nil || got != 1 {
		t.Fatalf("result = %d, %v; want 1", got, err)
	}
	// A run that waits for another name is not watched: "sent" at once.
	// The signal wakes the run, which an engine may be replaying (running)
	// when the CLI reads its status back.
	other := awaitWaiting(t, ctx, e)
	start := time.Now()
	if out := flowlite(t, nil, append(db, "signal", other, "unrelated", `1`)...); out.code != exitOK ||
		out.stdout != "signal unrelated sent to run "+other+" (it is waiting)\n" &&
			out.stdout != "signal unrelated sent to run "+other+" (it is running)\n" {
		t.Errorf("signal not waited for: exit %d, stdout %q", out.code, out.stdout)
	}
	if d := time.Since(start); d > defaultSignalWait {
		t.Errorf("signal not waited for took %s", d)
	}
	// Once no engine works the run's queue, nothing would receive the
	// signal now: it is stored, and the CLI does not wait for a verdict.
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if out := flowlite(t, nil, append(db, "signal", other, "decision", `{"approved":"maybe"}`)...); out.code != exitOK ||
		out.stdout != "signal decision sent to run "+other+" (it is waiting)\n" {
		t.Errorf("signal with no engine: exit %d, stdout %q, stderr %q", out.code, out.stdout, out.stderr)
	}
	if d := time.Since(start); d > defaultSignalWait {
		t.Errorf("signal with no engine took %s", d)
	}
}

func TestSignalReportsRejection(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "flow.db")
	e, err := flowsqlite.Open(ctx, path, &flow.Config{PollInterval: 5 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeEngine(t, e)
	flow.Register(e, decide)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	checkSignalVerdicts(t, ctx, e, []string{"--db", path})
}

func TestPostgresSignalReportsRejection(t *testing.T) {
	t.Parallel()
	dsn, schema := pgSchema(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	e := pgEngine(t, ctx, dsn, schema, decide)
	defer closeEngine(t, e)
	checkSignalVerdicts(t, ctx, e, []string{"--db", dsn, "--schema", schema})
}

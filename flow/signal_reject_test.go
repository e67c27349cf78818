package flow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

type verdict struct {
	Approved bool `json:"approved"`
}

// verdictWorkflow waits for a "verdict" signal and returns whether it
// approved.
var verdictWorkflow = flow.Workflow[string, bool]{
	Name: "verdict",
	Run: func(wc flow.Context, _ string) (bool, error) {
		v, err := flow.Receive[verdict](wc, "verdict", 0)
		if err != nil {
			return false, err
		}
		return v.Approved, nil
	},
}

// historyOf returns the run's history, failing the test on error.
func historyOf(t *testing.T, e *flow.Engine, runID string) []flow.Event {
	t.Helper()
	events, err := e.History(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// rejections returns the details of the run's signal_rejected events.
func rejections(t *testing.T, e *flow.Engine, runID string) []string {
	t.Helper()
	var out []string
	for _, ev := range historyOf(t, e, runID) {
		if ev.Kind == flow.EventSignalRejected {
			out = append(out, ev.Detail)
		}
	}
	return out
}

// A signal whose payload does not decode into the receiver's type is set
// aside, recorded, and the run keeps waiting; the next well-typed signal of
// the name completes it. Before, the run was suspended with a DecodeError
// on that receive and on every resume.
func TestWronglyTypedSignalIsRejectedAndTheRunKeepsWaiting(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := sqlitePath(t)
	e := openEngine(t, path, nil)
	flow.Register(e, verdictWorkflow)
	startEngine(t, e)

	run, err := flow.Start(ctx, e, verdictWorkflow, "expense-7", nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e, run.ID(), flow.StatusWaiting)

	// Sent while the run waits: received (and rejected) at once.
	sent, err := flow.Signal(ctx, e, run.ID(), "verdict", map[string]string{"approve": "yes"}, nil)
	if err != nil || !sent {
		t.Fatalf("signal = %v, %v; want sent", sent, err)
	}
	eventually(t, "the first rejection", func() bool { return len(rejections(t, e, run.ID())) == 1 })
	if info := awaitStatus(t, e, run.ID(), flow.StatusWaiting); info.Reason != "" && strings.Contains(info.Reason, "decode") {
		t.Fatalf("run waits with reason %q", info.Reason)
	}

	// Stored before the run looks again, in the order sent: a bad one, then a
	// good one; the wait rejects the first and receives the second.
	if _, err := flow.Signal(ctx, e, run.ID(), "verdict", "approved", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Signal(ctx, e, run.ID(), "verdict", verdict{Approved: true}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := run.Result(ctx)
	if err != nil || !got {
		t.Fatalf("result = %v, %v; want true, nil", got, err)
	}

	details := rejections(t, e, run.ID())
	if len(details) != 2 {
		t.Fatalf("rejections %q, want 2", details)
	}
	for _, d := range details {
		if !strings.Contains(d, "signal verdict #") || !strings.Contains(d, "flow_test.verdict") {
			t.Errorf("rejection %q does not name the signal and the type", d)
		}
	}
	if !strings.Contains(details[0], `unknown field "approve"`) {
		t.Errorf("rejection %q does not say why", details[0])
	}
	if n := countKind(t, e, run.ID(), flow.EventRunSuspended); n != 0 {
		t.Errorf("the run was suspended %d times", n)
	}
	if n := countKind(t, e, run.ID(), flow.EventSignalReceived); n != 1 {
		t.Errorf("%d signal_received events, want 1", n)
	}
	stored := storedSignals(t, path, run.ID())
	if len(stored) != 3 {
		t.Fatalf("stored signals %+v, want 3", stored)
	}
	for i, s := range stored {
		rejected := strings.HasPrefix(s.ConsumedBy, "rejected by ")
		if rejected != (i < 2) || s.ConsumedBy == "" {
			t.Errorf("signal %d (%s) consumed by %q; want the first two rejected, the last received", i, s.Payload, s.ConsumedBy)
		}
	}
}

// A run that recorded a wrongly typed payload as received, the way flowlite
// did before it rejected them, was suspended with a DecodeError on every
// resume. Resume now reopens that receive, marks its signal rejected, and
// the run waits for the next signal.
func TestRunWedgedByARecordedBadSignalResumes(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := sqlitePath(t)
	e, closeEngine := engineSession(t, path, nil, func(e *flow.Engine) { flow.Register(e, verdictWorkflow) })
	run, err := flow.Start(ctx, e, verdictWorkflow, "expense-8", &flow.StartOptions{RunID: "wedged"})
	if err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e, run.ID(), flow.StatusWaiting)
	closeEngine()

	// What the old engine left: the signal consumed by the receive, the
	// receive completed with the payload, the run suspended.
	db := rawDB(t, path)
	const waitKey = "flow.receive:verdict#0 of run wedged"
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO flowlite_signals (run_id, name, payload, sent_at, consumed_by) VALUES ('wedged', 'verdict', CAST('"yes"' AS BLOB), 1, '%s')`, waitKey),
		`UPDATE flowlite_steps SET status = 'completed', output = CAST('{"payload":"yes"}' AS BLOB), completed_seq = 1, finished_at = 1
		 WHERE run_id = 'wedged' AND name = 'flow.receive:verdict'`,
		`UPDATE flowlite_runs SET status = 'suspended', reason = 'run wedged: decode payload of step signal verdict into flow_test.verdict: json: cannot unmarshal string'
		 WHERE id = 'wedged'`,
	} {
		res, err := db.Exec(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%s: %d rows", q, n)
		}
	}

	e, _ = engineSession(t, path, nil, func(e *flow.Engine) { flow.Register(e, verdictWorkflow) })
	if err := e.Resume(ctx, "wedged"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the recorded receive to be rejected", func() bool { return len(rejections(t, e, "wedged")) == 1 })
	awaitStatus(t, e, "wedged", flow.StatusWaiting)
	if d := rejections(t, e, "wedged")[0]; !strings.Contains(d, "reopened") || !strings.Contains(d, "flow_test.verdict") {
		t.Errorf("rejection %q does not say the receive was reopened and why", d)
	}
	if stored := storedSignals(t, path, "wedged"); len(stored) != 1 || stored[0].ConsumedBy != "rejected by "+waitKey {
		t.Fatalf("stored signals %+v; want the recorded one rejected", stored)
	}

	if _, err := flow.Signal(ctx, e, "wedged", "verdict", verdict{Approved: true}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := handle(t, e, verdictWorkflow, "wedged").Result(ctx)
	if err != nil || !got {
		t.Fatalf("result = %v, %v; want true, nil", got, err)
	}
	var decodeErr *flow.DecodeError
	if errors.As(err, &decodeErr) {
		t.Fatal(err)
	}
}

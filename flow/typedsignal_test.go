package flow_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// decision is what an approver sends. A newer sender adds "by" before the
// receivers know it.
type decision struct {
	Approved bool `json:"approved"`
}

type decisionV2 struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

var (
	decisionSignal       = flow.NewSignal[decision]("decision")
	strictDecisionSignal = flow.NewSignal[decision]("decision").Strict()
)

// decisionWorkflow receives sig and returns whether it approved.
func decisionWorkflow(name string, sig flow.TypedSignal[decision]) flow.Workflow[string, bool] {
	return flow.Workflow[string, bool]{
		Name: name,
		Run: func(wc flow.Context, _ string) (bool, error) {
			d, err := sig.Receive(wc, 0)
			if err != nil {
				return false, err
			}
			return d.Approved, nil
		},
	}
}

// A field the receiver's type does not have is ignored: adding a field on
// the sending side is a compatible change (issue 22). Before, the signal was
// rejected with `unknown field "by"` and the run kept waiting.
func TestSignalWithAnAddedFieldIsReceived(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	flow.Register(e, verdictWorkflow)
	typed := decisionWorkflow("typed_decision", decisionSignal)
	flow.Register(e, typed)
	startEngine(t, e)

	byName, err := flow.Start(ctx, e, verdictWorkflow, "expense-9", nil)
	if err != nil {
		t.Fatal(err)
	}
	byValue, err := flow.Start(ctx, e, typed, "expense-10", nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e, byName.ID(), flow.StatusWaiting)
	awaitStatus(t, e, byValue.ID(), flow.StatusWaiting)
	if _, err := flow.Signal(ctx, e, byName.ID(), "verdict", decisionV2{Approved: true, By: "dana"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Signal(ctx, e, byValue.ID(), "decision", map[string]any{"approved": true, "by": "dana", "note": map[string]int{"n": 1}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, run := range []*flow.Run[bool]{byName, byValue} {
		got, err := run.Result(ctx)
		if err != nil || !got {
			t.Fatalf("run %s: result = %v, %v; want true, nil", run.ID(), got, err)
		}
		if r := rejections(t, e, run.ID()); len(r) != 0 {
			t.Errorf("run %s rejected %q", run.ID(), r)
		}
	}
}

// A strict signal refuses a payload with a field its type lacks; the run
// keeps waiting and takes the next signal, sent through the same typed
// value, which the string-named API receives alike.
func TestStrictSignalRejectsUnknownFields(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	wf := decisionWorkflow("strict_decision", strictDecisionSignal)
	flow.Register(e, wf)
	startEngine(t, e)

	if !strictDecisionSignal.IsStrict() || decisionSignal.IsStrict() || strictDecisionSignal.Name() != "decision" {
		t.Fatalf("Strict: %+v, %+v", strictDecisionSignal, decisionSignal)
	}
	run, err := flow.Start(ctx, e, wf, "expense-11", nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e, run.ID(), flow.StatusWaiting)
	if _, err := flow.Signal(ctx, e, run.ID(), "decision", decisionV2{Approved: true, By: "dana"}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the rejection", func() bool { return len(rejections(t, e, run.ID())) == 1 })
	if d := rejections(t, e, run.ID())[0]; !strings.Contains(d, `unknown field "by"`) || !strings.Contains(d, "signal decision #") {
		t.Errorf("rejection %q does not name the signal and the field", d)
	}
	awaitStatus(t, e, run.ID(), flow.StatusWaiting)
	if sent, err := strictDecisionSignal.Send(ctx, e, run.ID(), decision{Approved: true}, nil); err != nil || !sent {
		t.Fatalf("Send = %v, %v", sent, err)
	}
	if got, err := run.Result(ctx); err != nil || !got {
		t.Fatalf("result = %v, %v; want true, nil", got, err)
	}
}

// The zero TypedSignal has no name: using it fails with a NameError and
// stores nothing.
func TestZeroTypedSignalFailsWithNameError(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	flow.Register(e, verdictWorkflow)
	run, err := flow.Start(ctx, e, verdictWorkflow, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	var zero flow.TypedSignal[decision]
	if _, err := zero.Send(ctx, e, run.ID(), decision{}, nil); !errors.Is(err, flow.ErrInvalidName) {
		t.Fatalf("Send with the zero TypedSignal: %v, want ErrInvalidName", err)
	}
}

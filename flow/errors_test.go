package flow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// engineErrors are flowlite's sentinels a workflow body can get from a
// step that called the engine, each as a step would return it: wrapped,
// or as the error type that matches it.
var engineErrors = []struct {
	name string
	err  error // what the step returns
	is   error // the sentinel it matches
}{
	{"exists", fmt.Errorf("start: %w", flow.ErrRunExists), flow.ErrRunExists},
	{"finished", fmt.Errorf("cancel run r: %w: run r is completed", flow.ErrRunFinished), flow.ErrRunFinished},
	{"unknown-workflow", fmt.Errorf("start: %w", flow.ErrUnknownWorkflow), flow.ErrUnknownWorkflow},
	{"conflict", fmt.Errorf("resume: %w", flow.ErrConflict), flow.ErrConflict},
	{"cancelled", &flow.CancelledError{RunID: "r"}, flow.ErrCancelled},
	{"deadline", fmt.Errorf("run r: %w", flow.ErrDeadlineExceeded), flow.ErrDeadlineExceeded},
	{"rolled-back", &flow.RolledBackError{RunID: "r", Cause: "boom"}, flow.ErrRolledBack},
	{"suspended", &flow.SuspendedError{RunID: "r", Reason: "why"}, flow.ErrSuspended},
	{"too-large", fmt.Errorf("start: input: %w", flow.ErrPayloadTooLarge), flow.ErrPayloadTooLarge},
	{"invalid-name", &flow.NameError{Kind: "queue", Name: "", Rule: "is empty"}, flow.ErrInvalidName},
	{"timeout", fmt.Errorf("call: %w", context.DeadlineExceeded), context.DeadlineExceeded},
	{"busy", fmt.Errorf("start: %w", flow.ErrBusy), flow.ErrBusy},
	{"unavailable", fmt.Errorf("start: %w", flow.ErrUnavailable), flow.ErrUnavailable},
	{"closed", fmt.Errorf("start: %w", flow.ErrClosed), flow.ErrClosed},
	{"disk-full", fmt.Errorf("start: %w", flow.ErrDiskFull), flow.ErrDiskFull},
	{"read-only", fmt.Errorf("start: %w", flow.ErrReadOnly), flow.ErrReadOnly},
	{"timed-out", fmt.Errorf("wait: %w", flow.ErrTimedOut), flow.ErrTimedOut},
	{"schedule-not-found", fmt.Errorf("pause schedule s: %w", flow.ErrScheduleNotFound), flow.ErrScheduleNotFound},
	{"bad-spec", fmt.Errorf("schedule s: %w: never fires", flow.ErrBadSpec), flow.ErrBadSpec},
	{"definition-frozen", fmt.Errorf("put definition d: %w", flow.ErrDefinitionFrozen), flow.ErrDefinitionFrozen},
	{"not-supported", fmt.Errorf("backup: %w", flow.ErrNotSupported), flow.ErrNotSupported},
	{"shard-set", fmt.Errorf("start: %w", flow.ErrShardSet), flow.ErrShardSet},
	{"sharded", fmt.Errorf("changes: %w", flow.ErrSharded), flow.ErrSharded},
}

// A step error that matches one of flowlite's sentinels keeps matching it,
// and only it (and what it implies: a passed deadline is a cancellation),
// once recorded: on the first execution, and on the replay after the
// engine restarted. The body signals a run that does not exist
// (ErrRunNotFound, through SignalRun), and steps return the engine's other
// sentinels; it then waits for a signal, so that a second engine replays
// all of it. At dedb742 the first execution already lost them: "signal
// signal to run no-such-run: get run no-such-run: not found" did not match
// ErrRunNotFound.
func TestEngineErrorsKeepTheirIdentityInAWorkflow(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var mu sync.Mutex
	var executions [][]string // per execution of the body: what did not match as it should
	wf := flow.Workflow[int, string]{Name: "engine-errors", Run: func(wc flow.Context, _ int) (string, error) {
		var wrong []string
		check := func(name string, err, want error) {
			var se *flow.StepError
			if !errors.As(err, &se) {
				wrong = append(wrong, fmt.Sprintf("%s: %v is no StepError", name, err))
				return
			}
			if !errors.Is(err, want) {
				wrong = append(wrong, fmt.Sprintf("%s: %v does not match %v", name, err, want))
			}
			for _, other := range engineErrors {
				if other.is != want && errors.Is(err, other.is) && !errors.Is(want, other.is) {
					wrong = append(wrong, fmt.Sprintf("%s: %v also matches %v", name, err, other.is))
				}
			}
			if want != flow.ErrRunNotFound && errors.Is(err, flow.ErrRunNotFound) {
				wrong = append(wrong, fmt.Sprintf("%s: %v also matches ErrRunNotFound", name, err))
			}
		}
		check("not-found", flow.SignalRun(wc, "no-such-run", "signal", 1), flow.ErrRunNotFound)
		for _, c := range engineErrors {
			step := flow.Step[int, int]{Name: "return-" + c.name, Run: func(context.Context, int) (int, error) {
				return 0, flow.Permanent(c.err)
			}}
			_, err := flow.Do(wc, step, 0)
			check(c.name, err, c.is)
		}
		mu.Lock()
		executions = append(executions, wrong)
		mu.Unlock()
		if _, err := flow.Receive[string](wc, "go", 0); err != nil {
			return "", err
		}
		return strings.Join(wrong, "; "), nil
	}}
	register := func(e *flow.Engine) { flow.Register(e, wf) }
	e1, close1 := engineSession(t, path, testConfig(), register)
	run, err := flow.Start(ctx, e1, wf, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e1, run.ID(), flow.StatusWaiting)
	close1()

	e2, _ := engineSession(t, path, testConfig(), register)
	if _, err := flow.Signal(ctx, e2, run.ID(), "go", "now", nil); err != nil {
		t.Fatal(err)
	}
	r2, err := flow.Lookup(ctx, e2, wf, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Result(ctx); err != nil {
		t.Fatalf("run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(executions) < 2 {
		t.Fatalf("the body ran %d time(s), want a first execution and a replay", len(executions))
	}
	for i, wrong := range executions {
		what := "first execution"
		if i > 0 {
			what = fmt.Sprintf("replay %d", i)
		}
		for _, w := range wrong {
			t.Errorf("%s: %s", what, w)
		}
	}
}

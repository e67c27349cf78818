package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// The DAG of TestCrashResumeDAG, a workflow definition (flow/flowdef): a,
// then b fanned out over six items (three at a time), then c and d side by
// side, then e, which fails for good when the input says so and rolls the
// run back. Every value is a function of the input, so the test knows each
// output.
const dagDefinition = `
name: crash_dag
version: 1
inputs:
  n: {type: int}
  fail: {type: bool, default: false}
vars:
  total: {type: int, default: 0}
steps:
  - id: a
    uses: dag_add
    with: {n: input.n, v: 1}
  - id: b
    uses: dag_add
    needs: a
    forEach: 1..6
    parallelism: 3
    with: {n: input.n, v: item * steps.a.output}
  - id: c
    uses: dag_add
    needs: b
    with: {n: input.n, v: sum(steps.b.output)}
    set: {total: output}
  - id: d
    uses: dag_add
    needs: b
    with: {n: input.n, v: len(steps.b.output)}
  - id: e
    uses: dag_final
    needs: [c, d]
    with: {n: input.n, v: steps.c.output + steps.d.output, fail: input.fail}
outputs:
  e: steps.e.output
  total: vars.total
`

// childDAG is the value of envChild that makes a child work the DAG.
const childDAG = "dag"

// dagWant returns the outputs e and total of run n's DAG.
func dagWant(n int) (e, total int) {
	a := 1 + n
	sum := 0
	for i := 1; i <= 6; i++ {
		sum += i*a + n
	}
	c := sum + n
	d := 6 + n
	return c + d + n, c
}

// dagSteps compiles the definition against its two steps.
func dagWorkflow() (*flowdef.Workflow, error) {
	cat := flowdef.NewCatalog()
	if err := flowdef.AddStep(cat, flow.Step[stepIn, int]{
		Name: "dag_add", Retry: fastRetry, Compensate: undo,
		Run: func(ctx context.Context, in stepIn) (int, error) {
			if err := work(ctx); err != nil {
				return 0, err
			}
			return in.V + in.N, nil
		},
	}); err != nil {
		return nil, err
	}
	if err := flowdef.AddStep(cat, flow.Step[stepIn, int]{
		Name: "dag_final", Retry: fastRetry,
		Run: func(ctx context.Context, in stepIn) (int, error) {
			if err := work(ctx); err != nil {
				return 0, err
			}
			if in.Fail {
				return 0, flow.Permanent(fmt.Errorf("%s", errS3))
			}
			return in.V + in.N, nil
		},
	}); err != nil {
		return nil, err
	}
	return flowdef.Load("crash_dag.yaml", []byte(dagDefinition), cat)
}

// dagChildMain is a worker process for the DAG: it works the database
// until killed, or in drain mode until no run is left.
func dagChildMain() int {
	c, code := newWorkerEnv("dag child")
	if c == nil {
		return code
	}
	defer c.close()
	inc, lw, log, ctx, fail := c.inc, c.lw, c.log, c.ctx, c.fail
	cfg := childConfig(inc, lw, log)
	cfg.Intercept = func(ctx context.Context, info flow.AttemptInfo, call func(context.Context) error) error {
		// The ledger without the saga test's injected failures.
		prefix := ""
		if info.Compensation {
			prefix = "comp-"
		}
		if err := lw.record(prefix+"start", info); err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		err := call(ctx)
		kind := "done"
		if err != nil {
			kind = "fail"
		}
		if lerr := lw.record(prefix+kind, info); lerr != nil && err == nil {
			return fmt.Errorf("ledger: %w", lerr)
		}
		return err
	}
	e, err := flowsqlite.Open(ctx, os.Getenv(envDB), cfg, childOptions)
	if err != nil {
		return fail("open: %v", err)
	}
	defer e.Close()
	w, err := dagWorkflow()
	if err != nil {
		return fail("compile: %v", err)
	}
	if err := flowdef.Register(e, w); err != nil {
		return fail("register: %v", err)
	}
	return workChild(ctx, e, fail)
}

// TestCrashResumeDAG SIGKILLs worker processes while they run defined
// workflows in the middle of their DAG, then lets a last worker drain the
// runs, and checks that each run finished as if nothing happened: the
// completed ones with the outputs their input gives, each step completed
// once in the history and executed again only after a kill; the failing
// ones rolled back with every completed compensable step compensated; none
// suspended (a replay that asked for other calls than the recorded ones
// would suspend its run).
func TestCrashResumeDAG(t *testing.T) {
	t.Parallel()
	const runs, kills = 16, 6
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 0xda9))
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, db: filepath.Join(dir, "flow.db"), ledger: filepath.Join(dir, "ledger.txt")}
	ctx := t.Context()

	parent, err := flowsqlite.Open(ctx, h.db, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	w, err := dagWorkflow()
	if err != nil {
		t.Fatal(err)
	}
	if err := flowdef.Register(parent, w); err != nil {
		t.Fatal(err)
	}
	fails := func(n int) bool { return n%4 == 3 }
	for n := range runs {
		if _, err := flowdef.Start(ctx, parent, w, flowdef.Values{"n": n, "fail": fails(n)}, &flow.StartOptions{RunID: runID(n)}); err != nil {
			t.Fatal(err)
		}
	}
	for inc := 1; inc <= kills; inc++ {
		c := h.spawnMode(childDAG, inc, false)
		select {
		case <-c.ready:
		case err := <-c.done:
			h.fail("child %d exited before it was ready: %v", inc, err)
		case <-time.After(30 * time.Second):
			h.fail("child %d not ready", inc)
		}
		time.Sleep(time.Duration(30+rng.IntN(120)) * time.Millisecond)
		c.kill()
	}
	last := h.spawnMode(childDAG, kills+1, true)
	select {
	case err := <-last.done:
		if err != nil {
			h.fail("draining child: %v", err)
		}
	case <-time.After(2 * time.Minute):
		h.fail("runs not drained in time")
	}
	raw := openRaw(t, h.db)
	byRun := h.settledLedger(ctx, raw, kills+1)

	// The kills must have landed mid-DAG: some run's steps ran in more
	// than one process.
	resumed := 0
	for _, lines := range byRun {
		incs := map[int]bool{}
		for _, l := range lines {
			incs[l.inc] = true
		}
		if len(incs) > 1 {
			resumed++
		}
	}
	if resumed == 0 {
		t.Errorf("no run was resumed by another process: the kills missed the DAGs")
	}
	t.Logf("%d of %d runs resumed in another process", resumed, runs)
	for n := range runs {
		id := runID(n)
		info, err := parent.Inspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		completed := map[string]int{}
		compensated := map[string]int{}
		hist, err := parent.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range hist {
			switch ev.Kind {
			case flow.EventStepCompleted:
				completed[ev.Step]++
			case flow.EventCompensationCompleted:
				compensated[ev.Step]++
			}
		}
		for step, k := range completed {
			if k != 1 {
				t.Errorf("run %s: step %s completed %d times", id, step, k)
			}
		}
		done := map[string]int{}
		for _, l := range byRun[id] {
			if l.kind == "done" {
				done[l.step]++
			}
		}
		for step := range completed {
			if done[step] == 0 {
				t.Errorf("run %s: step %s completed but never ran", id, step)
			}
			if done[step] > kills+1 {
				t.Errorf("run %s: step %s ran %d times with %d kills", id, step, done[step], kills)
			}
		}
		if fails(n) {
			if info.Status != flow.StatusFailed {
				t.Errorf("run %s is %s, want failed (%s)", id, info.Status, info.Error)
				continue
			}
			// a, the six b items, c and d are compensable and completed.
			if len(compensated) != 9 {
				t.Errorf("run %s: compensated %v, want the 9 completed steps", id, compensated)
			}
			continue
		}
		if info.Status != flow.StatusCompleted {
			t.Errorf("run %s is %s, want completed (%s %s)", id, info.Status, info.Error, info.Reason)
			continue
		}
		wantE, wantTotal := dagWant(n)
		var out struct{ E, Total int }
		if err := json.Unmarshal(info.Output, &out); err != nil || out.E != wantE || out.Total != wantTotal {
			t.Errorf("run %s: output %s (%v), want e=%d total=%d", id, info.Output, err, wantE, wantTotal)
		}
		if len(completed) != 10 || len(compensated) != 0 {
			t.Errorf("run %s: completed %v, compensated %v", id, completed, compensated)
		}
	}
}

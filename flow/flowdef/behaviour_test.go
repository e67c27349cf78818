package flowdef_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/flow/flowtest"
	"github.com/flowlite/flowlite/internal/pgtest"
)

func load(t *testing.T, src string, cat *flowdef.Catalog) *flowdef.Workflow {
	t.Helper()
	w, err := flowdef.Load(t.Name()+".yaml", []byte(src), cat)
	if err != nil {
		t.Fatalf("load:\n%v", err)
	}
	return w
}

const sagaDef = `
name: saga
version: 1
inputs:
  id: {type: string}
outputs:
  url: steps.publish.output.url
steps:
  - id: extract
    uses: extract
    with: {source: '"db"', size: 5}
  - id: transform
    uses: transform
    needs: extract
    forEach: steps.extract.output.batches
    with: {batch: item}
  - id: load
    uses: load
    needs: [transform]
    compensate: truncate
    with: {sums: 'map(steps.transform.output, .sum)', table: '"t"'}
  - id: publish
    uses: publish
    needs: [load]
    with: {id: input.id}
`

// TestFailedNodeCompensatesInReverseCompletionOrder: when a node fails for
// good, the steps that completed are compensated in reverse completion
// order: the named compensation of load first, then each transform item,
// and extract (which has none) is left alone.
func TestFailedNodeCompensatesInReverseCompletionOrder(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	w := load(t, sagaDef, testCatalog(t, rec))
	env := flowtest.New(t, nil)
	_, run, err := flowtest.RunWorkflow(env, w.Flow(), flowdef.Values{"id": "fail"})
	if !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("err = %v, want rolled back", err)
	}
	if !strings.Contains(err.Error(), "publisher refused") {
		t.Errorf("err = %v, want the step's error", err)
	}
	comp := rec.compensated()
	if len(comp) != 4 || comp[0] != "truncate t-1" {
		t.Fatalf("compensations ran %v, want truncate first then the 3 transforms", comp)
	}
	got := env.Compensated(run.ID())
	for i, name := range got { // forEach items are branches of flow.All: all1.0/transform…
		got[i] = name[strings.LastIndex(name, "/")+1:]
	}
	if !slices.Equal(got, []string{"load", "transform", "transform", "transform"}) {
		t.Fatalf("history compensated %v", got)
	}
}

// TestConditionSkipsANodeAndItsDependents: a false if skips the node, and
// a node that needs a skipped node is skipped too; outputs see skipped.
func TestConditionSkipsANodeAndItsDependents(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	w := load(t, `
name: cond
version: 1
inputs:
  go: {type: bool}
steps:
  - id: first
    uses: echo
    input: '"a"'
  - id: gated
    uses: echo
    needs: first
    if: input.go
    input: '"b"'
  - id: after
    uses: echo
    needs: gated
    input: '"c"'
  - id: other
    uses: echo
    needs: first
    input: 'steps.first.output + "!"'
outputs:
  gated: steps.gated.skipped
  after: steps.after.skipped
  other: steps.other.output
`, testCatalog(t, rec))
	env := flowtest.New(t, nil)
	out, _, err := flowtest.RunWorkflow(env, w.Flow(), flowdef.Values{"go": false})
	if err != nil {
		t.Fatal(err)
	}
	if out["gated"] != true || out["after"] != true || out["other"] != "a!" {
		t.Fatalf("outputs %v", out)
	}
	if got := rec.ranSteps(); !slices.Equal(got, []string{"echo a", "echo a!"}) {
		t.Fatalf("ran %v", got)
	}
}

// TestForEachRespectsParallelism: at most parallelism items run at once,
// and the output keeps the items' order.
func TestForEachRespectsParallelism(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	w := load(t, `
name: fan
version: 1
steps:
  - id: squares
    uses: track
    forEach: '1..8'
    parallelism: 2
    input: item
outputs:
  squares: steps.squares.output
  sum: sum(steps.squares.output)
`, testCatalog(t, rec))
	env := flowtest.New(t, nil)
	out, _, err := flowtest.RunWorkflow(env, w.Flow(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out["sum"] != float64(204) {
		t.Fatalf("sum = %v", out["sum"])
	}
	sq, _ := out["squares"].([]any)
	if len(sq) != 8 || sq[0] != float64(1) || sq[7] != float64(64) {
		t.Fatalf("squares = %v", out["squares"])
	}
	if rec.maxActive > 2 || rec.maxActive < 1 {
		t.Fatalf("%d items ran at once, want at most 2", rec.maxActive)
	}
}

// TestReadyNodesRunTogetherInDocumentOrder: independent nodes are one wave;
// the run's history lists their starts in document order... for the
// record of calls, and a replay after a wait asks for the same calls.
func TestReadyNodesWaitAndReplayDeterministically(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	w := load(t, `
name: waves
version: 1
vars:
  seen: {type: string, default: ""}
steps:
  - id: c
    uses: echo
    input: '"c"'
    set: {seen: 'vars.seen + output'}
  - id: nap
    sleep: 2h
  - id: a
    uses: echo
    input: '"a"'
    set: {seen: 'vars.seen + output'}
  - id: gate
    receive: {signal: go, timeout: 1h}
  - id: z
    uses: echo
    needs: [a, c, nap, gate]
    input: 'vars.seen + string(steps.gate.output.n)'
outputs:
  z: steps.z.output
`, testCatalog(t, rec))
	if got := w.Order(); !slices.Equal(got, []string{"c", "nap", "a", "gate", "z"}) {
		t.Fatalf("order %v", got)
	}
	env := flowtest.New(t, nil)
	run := flowtest.Start(env, w.Flow(), nil, nil)
	if _, err := flow.Signal(t.Context(), env.Engine, run.ID(), "go", map[string]any{"n": 7}, nil); err != nil {
		t.Fatal(err)
	}
	out, err := flowtest.Await(env, run)
	if err != nil {
		t.Fatal(err)
	}
	// sets apply in document order after the wave: c then a.
	if out["z"] != "ca7" {
		t.Fatalf("z = %v", out["z"])
	}
	// each step ran once although the body replayed after the sleep.
	if got := rec.ranSteps(); len(got) != 3 {
		t.Fatalf("ran %v", got)
	}
}

// TestReceiveTimeoutFailsTheNode: a receive that times out fails its node,
// and the run is rolled back.
func TestReceiveTimeoutFailsTheNode(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	w := load(t, `
name: timeout
version: 1
steps:
  - id: load
    uses: load
    with: {table: '"x"'}
  - id: approval
    needs: load
    receive: {signal: approve, timeout: 30m}
`, testCatalog(t, rec))
	env := flowtest.New(t, nil)
	_, _, err := flowtest.RunWorkflow(env, w.Flow(), nil)
	if !errors.Is(err, flow.ErrRolledBack) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("err = %v", err)
	}
	if got := rec.compensated(); !slices.Equal(got, []string{"load"}) {
		t.Fatalf("compensated %v", got)
	}
}

// TestRetryOverride: a node's retry replaces the step's policy.
func TestRetryOverride(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	cat := testCatalog(t, rec)
	w := load(t, `
name: retry
version: 1
steps:
  - id: e
    uses: echo
    input: '"x"'
    retry: {maxAttempts: 3, initialInterval: 1s}
    timeout: 5s
`, cat)
	env := flowtest.New(t, nil)
	env.FailStep("e", 2, errors.New("flaky")) // steps are recorded under their node's ID
	if _, run, err := flowtest.RunWorkflow(env, w.Flow(), nil); err != nil {
		t.Fatalf("err = %v (attempts %v)", err, env.Attempts(run.ID()))
	}
	w1 := load(t, `
name: retry1
version: 1
steps:
  - id: e
    uses: echo
    input: '"x"'
    retry: {maxAttempts: 1}
`, cat)
	env.FailStep("e", 1, errors.New("flaky"))
	if _, run, err := flowtest.RunWorkflow(env, w1.Flow(), nil); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("err = %v, want a failure after one attempt (attempts %+v)", err, env.Attempts(run.ID()))
	}
}

// TestChildCalls: a definition calls a Go workflow and another definition.
func TestChildCalls(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	cat := testCatalog(t, rec)
	child := load(t, `
name: child_def
version: 2
inputs:
  word: {type: string}
steps:
  - id: e
    uses: echo
    input: 'upper(input.word)'
outputs:
  shout: steps.e.output
`, cat)
	if err := cat.AddDefinition(child); err != nil {
		t.Fatal(err)
	}
	parent := load(t, `
name: parent
version: 1
steps:
  - id: go
    call: {workflow: go_child}
    with: {id: '"7"'}
  - id: def
    call: child_def
    needs: go
    with: {word: 'steps.go.output.url'}
outputs:
  result: steps.def.output.shout
`, cat)
	env := flowtest.New(t, nil)
	flowtest.Register(env, goChild)
	flowtest.Register(env, child.Flow())
	out, _, err := flowtest.RunWorkflow(env, parent.Flow(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out["result"] != "GO://7" {
		t.Fatalf("result = %v", out["result"])
	}
	// A child's input is type-checked against its declared inputs.
	_, err = flowdef.Load("bad.yaml", []byte(`
name: parent_bad
version: 1
steps:
  - id: def
    call: child_def
    with: {word: '1', other: '2'}
`), cat)
	if err == nil || !strings.Contains(err.Error(), "int where string") || !strings.Contains(err.Error(), `the inputs of workflow child_def {word: string} has no field named "other" in JSON (it has word)`) {
		t.Fatalf("err = %v", err)
	}
}

// TestRunInputIsChecked: unknown and missing inputs fail the run for good,
// defaults fill the rest.
func TestRunInputIsChecked(t *testing.T) {
	t.Parallel()
	w := load(t, `
name: inputs
version: 1
inputs:
  a: {type: int}
  b: {type: string, default: "x"}
steps:
  - id: e
    uses: echo
    input: 'input.b + string(input.a)'
outputs:
  e: steps.e.output
`, testCatalog(t, &recorder{}))
	env := flowtest.New(t, nil)
	out, _, err := flowtest.RunWorkflow(env, w.Flow(), flowdef.Values{"a": 3})
	if err != nil || out["e"] != "x3" {
		t.Fatalf("out %v, err %v", out, err)
	}
	for _, in := range []flowdef.Values{{}, {"a": 1, "c": 2}, {"a": "one"}} {
		run := flowtest.Start(env, w.Flow(), in, &flow.StartOptions{RunID: "bad-" + strings.ReplaceAll(strings.Trim(strings.ReplaceAll(fmtValues(in), " ", ""), "{}"), ":", "")})
		if _, err := flowtest.Await(env, run); err == nil {
			t.Errorf("input %v was accepted", in)
		}
	}
}

// reopener returns a function that opens an engine on the same database
// each time: a SQLite file, or with FLOWLITE_TEST_BACKEND=postgres a schema
// of the test's own, so that restarts are tested on both backends.
func reopener(t *testing.T) func(context.Context) (*flow.Engine, error) {
	cfg := &flow.Config{PollInterval: 10 * time.Millisecond}
	if pgtest.Postgres() {
		dsn, schema := pgtest.Schema(t)
		return func(ctx context.Context) (*flow.Engine, error) {
			return flowpg.Open(ctx, dsn, cfg, pgOptions(schema))
		}
	}
	path := filepath.Join(t.TempDir(), "flow.db")
	return func(ctx context.Context) (*flow.Engine, error) { return flowsqlite.Open(ctx, path, cfg, nil) }
}

func fmtValues(v flowdef.Values) string {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return "{" + strings.Join(keys, ",") + "}"
}

// TestResumeAfterRestartMidDAG: an engine that stops while a run waits in
// the middle of the DAG leaves it to the next engine on the file, which
// replays the completed nodes from their records and finishes the run.
func TestResumeAfterRestartMidDAG(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	openDB := reopener(t)
	rec := &recorder{}
	start := func() (*flow.Engine, *flowdef.Workflow) {
		eng, err := openDB(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w := load(t, sagaDef+`
  - id: approval
    needs: [load]
    receive: {signal: approve}
`, testCatalog(t, rec))
		if err := flowdef.Register(eng, w); err != nil {
			t.Fatal(err)
		}
		if err := eng.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return eng, w
	}
	eng, w := start()
	run, err := flowdef.Start(ctx, eng, w, flowdef.Values{"id": "p"}, &flow.StartOptions{RunID: "mid-dag"})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		info, err := eng.Inspect(ctx, run.ID())
		if err != nil {
			t.Fatal(err)
		}
		if info.Status == flow.StatusWaiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run is %s, not waiting", info.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := len(rec.ranSteps())
	if err := eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	eng, w = start()
	defer func() { _ = eng.Stop(ctx); _ = eng.Close() }()
	if _, err := flow.Signal(ctx, eng, "mid-dag", "approve", true, nil); err != nil {
		t.Fatal(err)
	}
	run, err = flowdef.Lookup(ctx, eng, w, "mid-dag")
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out["url"] != "https://example.test/p" {
		t.Fatalf("out %v", out)
	}
	ran := rec.ranSteps()
	// extract, 3 transforms, load, publish; none of the first five again.
	if before != 6 || len(ran) != 6 {
		t.Fatalf("ran %v before the restart and %v in all", ran[:before], ran)
	}
}

// TestCancelMidDAGCompensates: cancelling a run that waits after completed
// nodes unwinds them, as for a Go workflow.
func TestCancelMidDAGCompensates(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	w := load(t, `
name: cancel
version: 1
steps:
  - id: load
    uses: load
    with: {table: '"x"'}
  - id: approval
    needs: load
    receive: {signal: approve}
`, testCatalog(t, rec))
	env := flowtest.New(t, nil)
	run := flowtest.Start(env, w.Flow(), nil, nil)
	for deadline := time.Now().Add(30 * time.Second); env.Inspect(run.ID()).Status != flow.StatusWaiting; {
		if time.Now().After(deadline) {
			t.Fatalf("run is %s, not waiting", env.Inspect(run.ID()).Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := run.Cancel(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := flowtest.Await(env, run); !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("err = %v, want cancelled", err)
	}
	if got := rec.compensated(); !slices.Equal(got, []string{"load"}) {
		t.Fatalf("compensated %v", got)
	}
}

// TestLibraryPinsRunsToTheirVersion: definitions stored in the database
// are compiled and registered by LoadLibrary; a run started on version 1
// finishes on version 1 after version 2 was applied, and new runs take
// version 2. A stored version in use cannot change.
func TestLibraryPinsRunsToTheirVersion(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	openDB := reopener(t)
	rec := &recorder{}
	v1 := `
name: versions
version: 1
steps:
  - id: gate
    receive: {signal: go}
  - id: e
    uses: echo
    needs: gate
    input: '"v1"'
outputs:
  v: steps.e.output
`
	v2 := strings.ReplaceAll(strings.ReplaceAll(v1, "version: 1", "version: 2"), `"v1"`, `"v2"`)
	open := func() (*flow.Engine, *flowdef.Library) {
		eng, err := openDB(ctx)
		if err != nil {
			t.Fatal(err)
		}
		lib, err := flowdef.LoadLibrary(ctx, eng, testCatalog(t, rec))
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return eng, lib
	}
	eng, _ := open()
	if _, res, err := flowdef.Apply(ctx, eng, "v1.yaml", []byte(v1), testCatalog(t, rec)); err != nil || res != "created" {
		t.Fatalf("apply v1: %v %v", res, err)
	}
	if _, _, err := flowdef.Apply(ctx, eng, "bad.yaml", []byte("name: x\nversion: 1\nsteps: []\n"), nil); !errors.Is(err, flowdef.ErrInvalid) {
		t.Fatalf("apply of an invalid definition: %v", err)
	}
	_ = eng.Stop(ctx)
	_ = eng.Close()

	eng, lib := open()
	old, err := lib.Start(ctx, eng, "versions", nil, &flow.StartOptions{RunID: "old"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := flowdef.Apply(ctx, eng, "v1.yaml", []byte(v1+"description: changed\n"), nil); !errors.Is(err, flow.ErrDefinitionFrozen) {
		t.Fatalf("changing v1 in use: %v", err)
	}
	if _, _, err := flowdef.Apply(ctx, eng, "v2.yaml", []byte(v2), nil); err != nil {
		t.Fatal(err)
	}
	_ = eng.Stop(ctx)
	_ = eng.Close()

	eng, lib = open()
	defer func() { _ = eng.Stop(ctx); _ = eng.Close() }()
	fresh, err := lib.Start(ctx, eng, "versions", nil, &flow.StartOptions{RunID: "new"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{old.ID(), fresh.ID()} {
		if _, err := flow.Signal(ctx, eng, id, "go", true, nil); err != nil {
			t.Fatal(err)
		}
	}
	oldRun, err := flowdef.Lookup(ctx, eng, lib.Version("versions", 1), "old")
	if err != nil {
		t.Fatal(err)
	}
	for run, want := range map[*flowdef.Run]string{oldRun: "v1", fresh: "v2"} {
		out, err := run.Result(ctx)
		if err != nil || out["v"] != want {
			t.Errorf("run %s: %v, %v; want %s", run.ID(), out, err, want)
		}
	}
	list, err := eng.ListDefinitions(ctx)
	if err != nil || len(list) != 2 || !list[0].InUse || !list[1].InUse || list[0].Hash != flowdef.Hash([]byte(v1)) {
		t.Fatalf("stored %+v, %v", list, err)
	}
}

// TestEmptyForEachAndDeadline: a fan-out over an empty list completes with
// an empty output; a run past its deadline mid-DAG is cancelled and its
// completed steps compensated.
func TestEmptyForEachAndDeadline(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	cat := testCatalog(t, rec)
	w := load(t, `
name: empty
version: 1
steps:
  - id: none
    uses: track
    forEach: '[]'
    input: item
  - id: after
    uses: echo
    needs: none
    input: 'string(len(steps.none.output))'
outputs:
  after: steps.after.output
`, cat)
	env := flowtest.New(t, nil)
	out, _, err := flowtest.RunWorkflow(env, w.Flow(), nil)
	if err != nil || out["after"] != "0" {
		t.Fatalf("out %v, err %v", out, err)
	}

	slow := load(t, `
name: slow
version: 1
steps:
  - id: load
    uses: load
    with: {table: '"t"'}
  - id: nap
    needs: load
    sleep: 2h
  - id: publish
    uses: publish
    needs: nap
    with: {id: steps.load.output.id}
`, cat)
	run := flowtest.Start(env, slow.Flow(), nil, &flow.StartOptions{Deadline: env.Now().Add(time.Hour)})
	if _, err := flowtest.Await(env, run); !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("err = %v, want cancelled by the deadline", err)
	}
	if got := rec.compensated(); !slices.Equal(got, []string{"load"}) {
		t.Fatalf("compensated %v", got)
	}
	if slices.Contains(rec.ranSteps(), "publish") {
		t.Fatal("publish ran after the deadline")
	}
}

// TestLibraryCompilesChildrenFirst: a stored definition that calls another
// compiles once the other did, whatever their order in the database, and
// one that cannot compile is reported while the rest load.
func TestLibraryCompilesChildrenFirst(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	eng, err := reopener(t)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	docs := map[string]string{
		"a_parent.yaml": `
name: a_parent
version: 1
steps:
  - id: child
    call: z_child
    with: {word: '"hi"'}
outputs:
  shout: steps.child.output.shout
`,
		"z_child.yaml": `
name: z_child
version: 1
inputs:
  word: {type: string}
steps:
  - id: e
    uses: echo
    input: upper(input.word)
outputs:
  shout: steps.e.output
`,
		"m_broken.yaml": `
name: m_broken
version: 1
steps:
  - id: e
    uses: echo
    input: '"x"'
`,
	}
	for file, src := range docs {
		if _, _, err := flowdef.Apply(ctx, eng, file, []byte(src), nil); err != nil {
			t.Fatal(err)
		}
	}
	// m_broken's step is missing from this catalog.
	cat := flowdef.NewCatalog()
	if err := flowdef.AddStep(cat, flow.Step[string, string]{
		Name: "echo_other", Run: func(_ context.Context, s string) (string, error) { return s, nil },
	}); err != nil {
		t.Fatal(err)
	}
	full := testCatalog(t, &recorder{})
	lib, err := flowdef.LoadLibrary(ctx, eng, full)
	if err != nil {
		t.Fatalf("load with the full catalog: %v", err)
	}
	if lib.Latest("a_parent") == nil || lib.Latest("z_child") == nil || lib.Latest("m_broken") == nil {
		t.Fatal("library lacks a definition")
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = eng.Stop(ctx) }()
	run, err := lib.Start(ctx, eng, "a_parent", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Result(ctx)
	if err != nil || out["shout"] != "HI" {
		t.Fatalf("out %v, err %v", out, err)
	}

	other, err := reopener(t)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for file, src := range docs {
		if _, _, err := flowdef.Apply(ctx, other, file, []byte(src), nil); err != nil {
			t.Fatal(err)
		}
	}
	partial, err := flowdef.LoadLibrary(ctx, other, cat)
	if err == nil || !strings.Contains(err.Error(), "m_broken version 1") || !strings.Contains(err.Error(), `unknown step "echo"`) {
		t.Fatalf("load with a partial catalog: %v", err)
	}
	if partial == nil || partial.Latest("m_broken") != nil {
		t.Fatalf("a definition that does not compile is in the library")
	}
}

// pgOptions are the options of an engine of the suite in schema, with the
// pooler the environment names (pgtest.Options), and a small pool.
func pgOptions(schema string) *flowpg.Options {
	o := pgtest.Options(schema)
	o.MaxConns = 4
	return o
}

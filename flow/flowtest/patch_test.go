package flowtest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowhistory"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// How a variant of the patched order workflow calls the charge.
type chargeCode int

const (
	oldCharge       chargeCode = iota // before the patch: step "charge"
	patchedCharge                     // flow.Patched("charge-v2") picks "charge_v2" or "charge"
	deprecatedPatch                   // flow.DeprecatePatch("charge-v2"), then "charge_v2"
	removedPatch                      // the patch removed: "charge_v2" alone
)

// patchOrder is an order workflow whose charge changed in place: reserve,
// charge (as code says), sleep an hour, ship. code is read at every call,
// so a test can deploy new code between two executions of a run. ran
// lists the step bodies that ran.
func patchOrder(code *atomic.Int32, ran *stepLog) flow.Workflow[int, int] {
	step := func(name string, add int) flow.Step[int, int] {
		return flow.Step[int, int]{Name: name, Run: func(_ context.Context, n int) (int, error) {
			ran.add(name)
			return n + add, nil
		}}
	}
	reserve, charge, chargeV2, ship := step("reserve", 1), step("charge", 10), step("charge_v2", 100), step("ship", 1000)
	return flow.Workflow[int, int]{Name: "patched_order", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
		n, err := flow.Do(wc, reserve, n)
		if err != nil {
			return 0, err
		}
		switch chargeCode(code.Load()) {
		case oldCharge:
			n, err = flow.Do(wc, charge, n)
		case patchedCharge:
			if flow.Patched(wc, "charge-v2") {
				n, err = flow.Do(wc, chargeV2, n)
			} else {
				n, err = flow.Do(wc, charge, n)
			}
		case deprecatedPatch:
			flow.DeprecatePatch(wc, "charge-v2")
			n, err = flow.Do(wc, chargeV2, n)
		case removedPatch:
			n, err = flow.Do(wc, chargeV2, n)
		}
		if err != nil {
			return 0, err
		}
		if err := flow.Sleep(wc, time.Hour); err != nil {
			return 0, err
		}
		return flow.Do(wc, ship, n)
	}}
}

// stepLog lists step bodies as they run.
type stepLog struct {
	mu    sync.Mutex
	names []string
}

func (l *stepLog) add(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names = append(l.names, name)
}

func (l *stepLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := l.names
	l.names = nil
	return names
}

// exportHistory writes the history of run to a file, as flowlite history
// --export does, and returns its path.
func exportHistory(t *testing.T, env *flowtest.Env, runID string) string {
	t.Helper()
	h, err := env.Engine.ExportHistory(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), runID+".json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Write(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// replayPatch replays the history file at path against a variant of the
// workflow, in an Env of its own, and checks that no step body ran.
func replayPatch(t *testing.T, path string, code chargeCode) (flow.ReplayReport, error) {
	t.Helper()
	var c atomic.Int32
	c.Store(int32(code))
	ran := &stepLog{}
	rep, err := flowtest.ReplayFile(flowtest.New(t, nil), patchOrder(&c, ran), path)
	if names := ran.take(); len(names) != 0 {
		t.Errorf("replay ran step bodies %v", names)
	}
	return rep, err
}

// stepNames lists the names of a run's step records.
func stepNames(info flow.RunInfo) []string {
	var names []string
	for _, s := range info.Steps {
		names = append(names, s.Name)
	}
	return names
}

// A patch inside one version: a run that charged before the deploy of the
// patched code stays on the old path when it resumes on it, a run started
// after takes the new one and records the marker, and both finish.
func TestPatchedBranchesOldRunsDownTheRecordedPath(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	var code atomic.Int32
	ran := &stepLog{}
	wf := patchOrder(&code, ran)

	old := flowtest.Start(env, wf, 0, &flow.StartOptions{RunID: "order-old"})
	awaitWaiting(t, env, old.ID())
	if got := ran.take(); !slices.Equal(got, []string{"reserve", "charge"}) {
		t.Fatalf("old run before the deploy ran %v", got)
	}

	code.Store(int32(patchedCharge)) // the deploy
	fresh := flowtest.Start(env, wf, 0, &flow.StartOptions{RunID: "order-new"})
	awaitWaiting(t, env, fresh.ID())
	if got := ran.take(); !slices.Equal(got, []string{"reserve", "charge_v2"}) {
		t.Fatalf("new run ran %v, want the patched path", got)
	}

	env.Advance(time.Hour)
	if out, err := flowtest.Await(env, old); err != nil || out != 1011 {
		t.Fatalf("old run: %d, %v; want 1011 (charged by the old step)", out, err)
	}
	if out, err := flowtest.Await(env, fresh); err != nil || out != 1101 {
		t.Fatalf("new run: %d, %v; want 1101 (charged by the new step)", out, err)
	}
	got := ran.take()
	slices.Sort(got)
	if !slices.Equal(got, []string{"ship", "ship"}) {
		t.Errorf("after the sleep the runs ran %v, want only their ships", got)
	}

	if names := stepNames(env.Inspect(old.ID())); !slices.Equal(names, []string{"reserve", "charge", "flow.sleep", "ship"}) {
		t.Errorf("old run's records %v: no marker, the old charge", names)
	}
	if names := stepNames(env.Inspect(fresh.ID())); !slices.Equal(names, []string{"reserve", "flow.patch:charge-v2", "charge_v2", "flow.sleep", "ship"}) {
		t.Errorf("new run's records %v, want the marker before the new charge", names)
	}
	var marked bool
	for _, ev := range env.History(fresh.ID()) {
		marked = marked || (ev.Kind == flow.EventStepCompleted && ev.Step == "flow.patch:charge-v2")
	}
	if !marked {
		t.Errorf("new run's history has no completed marker: %v", env.History(fresh.ID()))
	}

	// The change feed carries the marker, and time travel shows it.
	ctx := context.Background()
	var fed bool
	for c, err := range env.Engine.Changes(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		fed = fed || (c.RunID == fresh.ID() && c.Kind == flow.EventStepCompleted && c.Step == "flow.patch:charge-v2")
	}
	if !fed {
		t.Error("the change feed has no marker")
	}
	then, err := env.Engine.InspectAt(ctx, fresh.ID(), env.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if names := stepNames(then.Run); !slices.Contains(names, "flow.patch:charge-v2") || slices.Contains(names, "ship") {
		t.Errorf("new run an hour ago had records %v, want the marker and no ship yet", names)
	}
}

// A history recorded before the patch replays down the old path against
// the patched code, and one recorded with the marker down the new path;
// code that dropped Patched where a history has its marker diverges, and
// DeprecatePatch accepts histories recorded with the marker.
func TestPatchedReplaysRecordedHistories(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	var code atomic.Int32
	wf := patchOrder(&code, &stepLog{})
	run := func(id string) string {
		r := flowtest.Start(env, wf, 0, &flow.StartOptions{RunID: id})
		awaitWaiting(t, env, r.ID())
		env.Advance(time.Hour)
		if _, err := flowtest.Await(env, r); err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
		return exportHistory(t, env, id)
	}
	before := run("before-patch")
	code.Store(int32(patchedCharge))
	marked := run("with-marker")

	for _, tt := range []struct {
		name     string
		path     string
		code     chargeCode
		calls    int
		recorded string // the divergence's recorded call; empty: clean
		replayed string
	}{
		{"old history, patched code", before, patchedCharge, 4, "", ""},
		{"marked history, patched code", marked, patchedCharge, 5, "", ""},
		{"marked history, deprecated patch", marked, deprecatedPatch, 5, "", ""},
		{"marked history, old code", marked, oldCharge, 0, `patch marker "charge-v2"`, `step "charge"`},
		{"marked history, patch removed", marked, removedPatch, 0, `patch marker "charge-v2"`, `step "charge_v2"`},
		{"old history, patch removed", before, removedPatch, 0, `step "charge"`, `step "charge_v2"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := replayPatch(t, tt.path, tt.code)
			if tt.recorded == "" {
				if err != nil || !rep.Returned || rep.Calls != tt.calls {
					t.Fatalf("replay: %+v, %v; want %d calls and a body that returned", rep, err, tt.calls)
				}
				return
			}
			var nd *flow.NonDeterminismError
			if !errors.As(err, &nd) {
				t.Fatalf("replay: %+v, %v; want a *NonDeterminismError", rep, err)
			}
			if nd.Position != 1 || nd.Recorded != tt.recorded || nd.Replayed != tt.replayed {
				t.Errorf("divergence %+v, want call 2 recorded %s, replayed %s", nd, tt.recorded, tt.replayed)
			}
		})
	}
}

// A run that resumes on code that no longer calls Patched where its
// history has the marker is suspended, as for any changed call; and a run
// started on the deprecated code records no marker.
func TestPatchMarkerRemovedTooEarlySuspends(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	var code atomic.Int32
	code.Store(int32(patchedCharge))
	ran := &stepLog{}
	wf := patchOrder(&code, ran)
	r := flowtest.Start(env, wf, 0, &flow.StartOptions{RunID: "marked"})
	awaitWaiting(t, env, r.ID())

	code.Store(int32(removedPatch))
	env.Advance(time.Hour)
	_, err := flowtest.Await(env, r)
	var suspended *flow.SuspendedError
	if !errors.As(err, &suspended) || !strings.Contains(suspended.Reason, `patch marker "charge-v2"`) {
		t.Fatalf("run resumed without its patch call: %v, want it suspended naming the marker", err)
	}

	code.Store(int32(deprecatedPatch))
	d := flowtest.Start(env, wf, 0, &flow.StartOptions{RunID: "deprecated"})
	awaitWaiting(t, env, d.ID())
	if names := stepNames(env.Inspect(d.ID())); !slices.Equal(names, []string{"reserve", "charge_v2", "flow.sleep"}) {
		t.Errorf("run on deprecated patch recorded %v, want no marker", names)
	}
}

// Patched decides once per run: in a loop it records one marker, and a
// loop recorded before the patch stays on the old path in every iteration,
// even those that run after the deploy.
func TestPatchedDecidesOncePerRun(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	var patched atomic.Bool
	tick := flow.Step[int, int]{Name: "tick", Run: func(_ context.Context, n int) (int, error) { return n + 1, nil }}
	tock := flow.Step[int, int]{Name: "tock", Run: func(_ context.Context, n int) (int, error) { return n + 100, nil }}
	wf := flow.Workflow[int, int]{Name: "patched_loop", Run: func(wc flow.Context, n int) (int, error) {
		for i := 0; i < 3; i++ {
			s := tick
			if patched.Load() && flow.Patched(wc, "tock") {
				s = tock
			}
			var err error
			if n, err = flow.Do(wc, s, n); err != nil {
				return 0, err
			}
			if i == 0 {
				if err := flow.Sleep(wc, time.Hour); err != nil {
					return 0, err
				}
			}
		}
		return n, nil
	}}
	old := flowtest.Start(env, wf, 0, &flow.StartOptions{RunID: "loop-old"})
	awaitWaiting(t, env, old.ID())
	patched.Store(true)
	fresh := flowtest.Start(env, wf, 0, &flow.StartOptions{RunID: "loop-new"})
	awaitWaiting(t, env, fresh.ID())
	env.Advance(time.Hour)
	if out, err := flowtest.Await(env, old); err != nil || out != 3 {
		t.Errorf("old loop: %d, %v; want 3 ticks", out, err)
	}
	if out, err := flowtest.Await(env, fresh); err != nil || out != 300 {
		t.Errorf("new loop: %d, %v; want 3 tocks", out, err)
	}
	var markers int
	for _, name := range stepNames(env.Inspect(fresh.ID())) {
		if strings.HasPrefix(name, "flow.patch:") {
			markers++
		}
	}
	if markers != 1 {
		t.Errorf("new loop recorded %d markers, want 1", markers)
	}
}

// awaitWaiting waits, without moving the clock, until run waits.
func awaitWaiting(t *testing.T, env *flowtest.Env, runID string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if env.Inspect(runID).Status == flow.StatusWaiting {
			return
		}
	}
	t.Fatalf("run %s does not wait: %+v", runID, env.Inspect(runID))
}

// testdata/order-before-patch.json is the exported history of a run of
// patchOrder's code before the patch (oldCharge), kept as a file so that
// the patched code goes on replaying histories recorded by earlier
// releases down the old path.
func TestPatchedReplaysAHistoryFileRecordedBeforeThePatch(t *testing.T) {
	t.Parallel()
	rep, err := replayPatch(t, filepath.Join("testdata", "order-before-patch.json"), patchedCharge)
	if err != nil || !rep.Returned || rep.Calls != 4 || rep.RunID != "order-before-patch" {
		t.Fatalf("replay: %+v, %v; want the 4 recorded calls and the recorded output", rep, err)
	}
	if _, err := replayPatch(t, filepath.Join("testdata", "order-before-patch.json"), removedPatch); err == nil {
		t.Error("the file replays against code without its old path; the test proves nothing")
	}
}

// Each branch of flow.All decides a patch on its own, in its own scope:
// a branch recorded before the patch stays on the old path while its
// sibling, which had not got there, takes the new one, whatever order the
// branches replay in.
func TestPatchedDecidesPerParallelBranch(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	var patched atomic.Bool
	add := func(name string, n int) flow.Step[int, int] {
		return flow.Step[int, int]{Name: name, Run: func(_ context.Context, v int) (int, error) { return v + n, nil }}
	}
	oldStep, newStep := add("old", 1), add("new", 10)
	charge := func(wc flow.Context, v int) (int, error) {
		if patched.Load() && flow.Patched(wc, "split") {
			return flow.Do(wc, newStep, v)
		}
		return flow.Do(wc, oldStep, v)
	}
	wf := flow.Workflow[int, int]{Name: "patched_branches", Run: func(wc flow.Context, _ int) (int, error) {
		out, err := flow.All(wc,
			func(wc flow.Context) (int, error) { return charge(wc, 0) },
			func(wc flow.Context) (int, error) {
				if err := flow.Sleep(wc, time.Hour); err != nil {
					return 0, err
				}
				return charge(wc, 100)
			},
		)
		if err != nil {
			return 0, err
		}
		return out[0] + out[1], nil
	}}
	r := flowtest.Start(env, wf, 0, &flow.StartOptions{RunID: "branches"})
	awaitWaiting(t, env, r.ID())
	patched.Store(true)
	env.Advance(time.Hour)
	if out, err := flowtest.Await(env, r); err != nil || out != 1+110 {
		t.Fatalf("run: %d, %v; want 111 (first branch old, second new)", out, err)
	}
	var markers []string
	for _, name := range stepNames(env.Inspect(r.ID())) {
		if strings.Contains(name, "flow.patch:") {
			markers = append(markers, name)
		}
	}
	if len(markers) != 1 || !strings.HasSuffix(markers[0], "/flow.patch:split") {
		t.Errorf("markers %v, want one, in the second branch's scope", markers)
	}
	path := exportHistory(t, env, r.ID())
	rep, err := flowtest.ReplayFile(flowtest.New(t, nil), wf, path)
	if err != nil || !rep.Returned {
		t.Errorf("replay of the run: %+v, %v", rep, err)
	}
}

// A history recorded before calls had positions predates every patch:
// Patched takes the old path there too, even where the history ends.
func TestPatchedTakesTheOldPathOfAHistoryWithoutPositions(t *testing.T) {
	t.Parallel()
	f, err := os.Open(filepath.Join("testdata", "order-before-patch.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := flowhistory.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	// The run as it stood before its sleep (reserve and charge recorded),
	// from a release that recorded no positions.
	h.Steps = h.Steps[:2]
	for i := range h.Steps {
		h.Steps[i].Position = -1
	}
	h.Events = slices.DeleteFunc(h.Events, func(ev flowhistory.Event) bool { return ev.Kind == flow.EventRunCompleted })
	h.Run.Status, h.Run.Output = string(flow.StatusRunning), nil
	var code atomic.Int32
	code.Store(int32(patchedCharge))
	ran := &stepLog{}
	rep, err := flowtest.Replay(flowtest.New(t, nil), patchOrder(&code, ran), h)
	if err != nil || rep.Returned || rep.Frontier != "sleep" {
		t.Fatalf("replay: %+v, %v; want the old path up to the sleep", rep, err)
	}
	if names := ran.take(); len(names) != 0 {
		t.Errorf("replay ran step bodies %v", names)
	}
}

// A patch that adds calls after the last one of a finished run: its
// history ends where Patched is called, and since the recorded body
// returned there, the replay takes the old path and returns as it did.
func TestPatchedAtTheEndOfAFinishedHistoryTakesTheOldPath(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	var patched atomic.Bool
	var notified atomic.Int64
	ship := flow.Step[int, int]{Name: "ship", Run: func(_ context.Context, n int) (int, error) { return n + 1, nil }}
	notify := flow.Step[int, int]{Name: "notify", Run: func(_ context.Context, n int) (int, error) { notified.Add(1); return n, nil }}
	wf := flow.Workflow[int, int]{Name: "patched_tail", Run: func(wc flow.Context, n int) (int, error) {
		n, err := flow.Do(wc, ship, n)
		if err != nil || !patched.Load() || !flow.Patched(wc, "notify") {
			return n, err
		}
		return flow.Do(wc, notify, n)
	}}
	out, run, err := flowtest.RunWorkflow(env, wf, 1)
	if err != nil || out != 2 {
		t.Fatalf("run: %d, %v", out, err)
	}
	path := exportHistory(t, env, run.ID())
	patched.Store(true)
	rep, err := flowtest.ReplayFile(flowtest.New(t, nil), wf, path)
	if err != nil || !rep.Returned || rep.Calls != 1 {
		t.Fatalf("replay of the finished history: %+v, %v; want its one call and a body that returned", rep, err)
	}
	if out, _, err := flowtest.RunWorkflow(env, wf, 1); err != nil || out != 2 || notified.Load() != 1 {
		t.Errorf("a new run: %d, %v, %d notifications; want the patched path", out, err, notified.Load())
	}
}

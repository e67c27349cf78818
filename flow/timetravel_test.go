package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// op is one call of a randomized workflow.
type op struct {
	Kind  string // step, sleep, receive
	Name  string // step name (a few names, so occurrences repeat)
	Fails int    // step: attempts that fail before one succeeds
	Comp  bool   // step: has a compensation
	CompX int    // step: compensation attempts that fail first
}

// plan is the input of the randomized workflow: its calls and whether the
// body fails at the end (which unwinds the completed steps).
type plan struct {
	Ops  []op
	Fail bool
}

func randomPlan(r *rand.Rand) plan {
	var p plan
	for range 2 + r.IntN(6) {
		switch k := r.IntN(10); {
		case k < 6:
			fails := 0
			if r.IntN(3) == 0 {
				fails = 1 + r.IntN(4) // 3 attempts: may fail for good
			}
			p.Ops = append(p.Ops, op{Kind: "step", Name: []string{"a", "b", "c"}[r.IntN(3)], Fails: fails,
				Comp: r.IntN(2) == 0, CompX: []int{0, 0, 1, 3}[r.IntN(4)]}) // 3: fails for good, the run is suspended
		case k < 8:
			p.Ops = append(p.Ops, op{Kind: "sleep"})
		case k < 9:
			p.Ops = append(p.Ops, op{Kind: "receive", Name: []string{"go", "more"}[r.IntN(2)]})
		default:
			p.Ops = append(p.Ops, op{Kind: []string{"child", "all", "first", "stream"}[r.IntN(4)], Name: "d"})
		}
	}
	p.Fail = r.IntN(3) == 0
	return p
}

// The history is the run's record: folding all of it gives what Inspect
// returns now, and folding every prefix gives what Inspect returned when
// that prefix was the whole history. Randomized workflows (steps that
// succeed, fail for good or after retries, compensations that retry or
// fail for good and are resumed or skipped, sleeps, signals accepted and
// rejected, children, All and First, stream writes of bodies and steps, cancellation) are inspected over and over while they run; each
// snapshot taken with no event recorded in between is compared with the
// fold of the events recorded when it was taken.
func TestTimeTravelFoldMatchesInspect(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)

	var mu sync.Mutex
	attempts := map[string]int{} // run/step#i → attempts made
	bump := func(key string) int {
		mu.Lock()
		defer mu.Unlock()
		attempts[key]++
		return attempts[key]
	}
	double := flow.Step[int, int]{Name: "d", Run: func(_ context.Context, n int) (int, error) { return 2 * n, nil }}
	child := flow.Workflow[int, int]{Name: "random_child", Run: func(wc flow.Context, n int) (int, error) {
		return flow.Do(wc, double, n)
	}}
	branch := func(n int) func(flow.Context) (int, error) {
		return func(wc flow.Context) (int, error) {
			if _, err := flow.WriteStream(wc, "branches", n); err != nil {
				return 0, err
			}
			return flow.Do(wc, double, n)
		}
	}
	flow.Register(e, child)
	wf := flow.Workflow[plan, int]{Name: "random", Version: 1, Run: func(wc flow.Context, p plan) (int, error) {
		sum := 0
		for i, o := range p.Ops {
			switch o.Kind {
			case "step":
				key := fmt.Sprintf("%s/%d", wc.RunID(), i)
				step := flow.Step[int, int]{Name: o.Name, Retry: &fastRetry,
					Run: func(ctx context.Context, n int) (int, error) {
						if err := flow.WriteStreamCtx(ctx, "s", n); err != nil {
							return 0, err
						}
						if bump(key) <= o.Fails {
							return 0, fmt.Errorf("step %d failed", i)
						}
						return n * 2, nil
					}}
				if o.Comp {
					step.CompensateRetry = &fastRetry
					step.Compensate = func(context.Context, int, int) error {
						if bump(key+"/undo") <= o.CompX {
							return errors.New("undo failed once")
						}
						return nil
					}
				}
				out, err := flow.Do(wc, step, i+1)
				if err != nil {
					return 0, err
				}
				sum += out
			case "sleep":
				if err := flow.Sleep(wc, 5*time.Millisecond); err != nil {
					return 0, err
				}
			case "receive":
				n, err := flow.Receive[int](wc, o.Name, 0)
				if err != nil {
					return 0, err
				}
				sum += n
			case "child":
				n, err := flow.Call(wc, child, i, nil)
				if err != nil {
					return 0, err
				}
				sum += n
			case "all":
				ns, err := flow.All(wc, branch(i), branch(i+1))
				if err != nil {
					return 0, err
				}
				sum += ns[0] + ns[1]
			case "first":
				n, _, err := flow.First(wc, branch(i), branch(i+1))
				if err != nil {
					return 0, err
				}
				sum += n
			case "stream":
				if _, err := flow.WriteStream(wc, "s", i); err != nil {
					return 0, err
				}
				if i%2 == 0 {
					if err := flow.CloseStream(wc, "closed"); err != nil {
						return 0, err
					}
				}
			}
		}
		if p.Fail {
			return 0, errors.New("plan says fail")
		}
		return sum, nil
	}}
	flow.Register(e, wf)
	startEngine(t, e)

	type snapshot struct {
		events int
		info   flow.RunInfo
	}
	for i := range 12 {
		p := randomPlan(r)
		run, err := flow.Start(ctx, e, wf, p, &flow.StartOptions{RunID: fmt.Sprintf("tt-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		var snaps []snapshot
		cancel := i%4 == 3 // the poller cancels this run at its first receive instead of signalling it
		cancelled := false
		operated := false
		for {
			before, err := e.History(ctx, run.ID())
			if err != nil {
				t.Fatal(err)
			}
			info, err := e.Inspect(ctx, run.ID())
			if err != nil {
				t.Fatal(err)
			}
			after, err := e.History(ctx, run.ID())
			if err != nil {
				t.Fatal(err)
			}
			if len(before) == len(after) {
				snaps = append(snaps, snapshot{len(after), info})
			}
			for _, s := range info.Steps {
				if s.Status == "waiting" && strings.HasPrefix(s.Name, "flow.receive:") && cancel && !cancelled {
					if err := e.Cancel(ctx, run.ID()); err != nil && !errors.Is(err, flow.ErrRunFinished) {
						t.Fatal(err)
					}
					cancelled = true
				}
				if s.Status == "waiting" && strings.HasPrefix(s.Name, "flow.receive:") && !cancel {
					name := strings.TrimPrefix(s.Name, "flow.receive:")
					if name == "more" {
						// A payload Receive[int] cannot decode comes first: it is
						// rejected (signal_rejected) and the wait goes on.
						if _, err := flow.Signal(ctx, e, run.ID(), name, "not a number", &flow.SignalOptions{Key: "bad" + s.Name + fmt.Sprint(s.Occurrence)}); err != nil && !errors.Is(err, flow.ErrRunFinished) {
							t.Fatal(err)
						}
					}
					// The snapshot may be older than the run: a run that took the
					// keyed signal of an earlier pass can have finished since.
					if _, err := flow.Signal(ctx, e, run.ID(), name, 10, &flow.SignalOptions{Key: s.Name + fmt.Sprint(s.Occurrence)}); err != nil && !errors.Is(err, flow.ErrRunFinished) {
						t.Fatal(err)
					}
				}
			}
			if info.Status == flow.StatusSuspended && !operated {
				// An operator acts once: resume (retry the compensation) or
				// skip it, alternately.
				operated = true
				op := e.Resume
				if i%2 == 0 {
					op = e.Skip
				}
				if err := op(ctx, run.ID()); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if info.Status.Finished() || info.Status == flow.StatusSuspended {
				break
			}
			time.Sleep(time.Millisecond)
		}
		history, err := e.History(ctx, run.ID())
		if err != nil {
			t.Fatal(err)
		}
		final, err := e.Inspect(ctx, run.ID())
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, snapshot{len(history), final})
		distinct := map[int]bool{}
		for _, s := range snaps {
			if s.events == 0 {
				continue
			}
			distinct[s.events] = true
			got, err := e.InspectAfter(ctx, run.ID(), history[s.events-1].ID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := compareStates(got.Run, s.info); diff != "" {
				t.Fatalf("run %s (plan %+v), after %d of %d events (last %s): fold differs from Inspect then:\n%s\nhistory:\n%s",
					run.ID(), p, s.events, len(history), history[s.events-1].Kind, diff, describeHistory(history[:s.events]))
			}
		}
		// InspectAt the final event's time is the full fold.
		at, err := e.InspectAt(ctx, run.ID(), history[len(history)-1].At)
		if err != nil {
			t.Fatal(err)
		}
		if diff := compareStates(at.Run, final); diff != "" {
			t.Fatalf("run %s: InspectAt(last event) differs from Inspect:\n%s", run.ID(), diff)
		}
		kinds := map[string]int{}
		for _, ev := range history {
			kinds[ev.Kind]++
		}
		t.Logf("run %s: %d events, %d snapshots at %d distinct prefixes, final %s; %v", run.ID(), len(history), len(snaps), len(distinct), final.Status, kinds)
	}
}

// comparable is the part of a RunInfo that the history determines.
type comparableRun struct {
	Status          flow.RunStatus
	Output          string
	Error, Reason   string
	CancelRequested bool
	StartedAt       time.Time
	FinishedAt      time.Time
	Steps           []comparableStep
}

type comparableStep struct {
	flow.StepRecord
	Input, Output string
}

func comparableOf(r flow.RunInfo) comparableRun {
	c := comparableRun{Status: r.Status, Output: string(r.Output), Error: r.Error, Reason: r.Reason,
		CancelRequested: r.CancelRequested, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt}
	for _, s := range r.Steps {
		cs := comparableStep{StepRecord: s, Input: string(s.Input), Output: string(s.Output)}
		cs.StepRecord.Input, cs.StepRecord.Output = nil, nil
		c.Steps = append(c.Steps, cs)
	}
	return c
}

func compareStates(fold, inspect flow.RunInfo) string {
	a, b := comparableOf(fold), comparableOf(inspect)
	if reflect.DeepEqual(a, b) {
		return ""
	}
	ja, _ := json.MarshalIndent(a, "", " ")
	jb, _ := json.MarshalIndent(b, "", " ")
	return "fold:    " + string(ja) + "\ninspect: " + string(jb)
}

func describeHistory(evs []flow.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "  %d %s %s#%d a%d %s\n", ev.At.UnixMilli(), ev.Kind, ev.Step, ev.Occurrence, ev.Attempt, ev.Detail)
	}
	return b.String()
}

// InspectAt refuses an instant before the run started, and an unknown run,
// with errors that say so; InspectAfter refuses an event of another run.
func TestTimeTravelBadInput(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	wf := flow.Workflow[int, int]{Name: "tt_bad", Run: func(wc flow.Context, n int) (int, error) { return n, nil }}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := e.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.InspectAt(ctx, run.ID(), info.CreatedAt.Add(-time.Second))
	if !errors.Is(err, flow.ErrBeforeRun) || !strings.Contains(err.Error(), run.ID()) {
		t.Fatalf("InspectAt before the run: %v, want ErrBeforeRun naming the run", err)
	}
	if _, err := e.InspectAt(ctx, "nope", time.Now()); !errors.Is(err, flow.ErrRunNotFound) {
		t.Fatalf("InspectAt of an unknown run: %v, want ErrRunNotFound", err)
	}
	if _, err := e.InspectAfter(ctx, run.ID(), -5); !errors.Is(err, flow.ErrNoSuchEvent) {
		t.Fatalf("InspectAfter of an unknown event: %v, want ErrNoSuchEvent", err)
	}
	st, err := e.InspectAt(ctx, run.ID(), info.CreatedAt)
	if err != nil {
		t.Fatal(err)
	}
	if st.Run.Status != flow.StatusPending && st.Run.Status != flow.StatusRunning {
		t.Fatalf("status at creation %s, want pending or running", st.Run.Status)
	}
}

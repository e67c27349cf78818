package flow_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/clock"
)

// scheduleEpoch is half a second past a whole minute, so that slots (whole
// seconds) never coincide with the clock.
var scheduleEpoch = time.Date(2030, 1, 1, 0, 0, 0, 500_000_000, time.UTC)

var echo = flow.Workflow[int, int]{Name: "echo", Run: func(_ flow.Context, n int) (int, error) { return n, nil }}

// scheduleConfig is a test config on clk whose leases never expire however
// far the clock moves.
func scheduleConfig(clk flow.Clock, worker string) *flow.Config {
	cfg := testConfig()
	cfg.Clock = clk
	cfg.WorkerID = worker
	cfg.LeaseTimeout = 100_000 * time.Hour
	return cfg
}

// runIDs returns the IDs of the runs of workflow, sorted.
func runIDs(t *testing.T, e *flow.Engine, workflow string) []string {
	t.Helper()
	runs, err := e.ListRuns(context.Background(), flow.RunFilter{Workflow: workflow, Limit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	slices.Sort(ids)
	return ids
}

// slotIDs returns the run IDs of schedule name for n slots a step apart
// from first, sorted.
func slotIDs(name string, first time.Time, step time.Duration, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = flow.ScheduledRunID(name, first.Add(time.Duration(i)*step))
	}
	slices.Sort(ids)
	return ids
}

func waitForRun(t *testing.T, e *flow.Engine, id string) {
	t.Helper()
	eventually(t, "run "+id, func() bool {
		_, err := e.Inspect(context.Background(), id)
		return err == nil
	})
}

// waitNextAt waits until schedule name's next slot is want, i.e. until a
// scheduler handled every slot before it.
func waitNextAt(t *testing.T, e *flow.Engine, name string, want time.Time) {
	t.Helper()
	eventually(t, fmt.Sprintf("next slot of %s at %s", name, want), func() bool {
		info, err := e.LookupSchedule(context.Background(), name)
		return err == nil && info.NextAt.Equal(want)
	})
}

// Two engines on one file, sharing a clock, run a per-second schedule for
// 300 simulated seconds: each of the 300 slots that came due (the first at
// epoch+1s, the last at epoch+300s) starts exactly one run, with the slot's
// run ID, and no run is started twice.
func TestScheduleTwoEnginesStartEachSlotOnce(t *testing.T) {
	t.Parallel()
	// 300 slots take a few seconds, but up to a minute under -race on a
	// busy machine: more than waitCtx allows.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	path := dbPath(t)
	clk := clock.NewManual(scheduleEpoch)
	engines := make([]*flow.Engine, 2)
	for i := range engines {
		engines[i] = openEngine(t, path, scheduleConfig(clk, fmt.Sprintf("engine-%d", i)))
		flow.Register(engines[i], echo)
		// Every process declares the schedule at start-up.
		if err := flow.Schedule(ctx, engines[i], "tick", "* * * * * *", echo, 7, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range engines {
		startEngine(t, e)
	}

	const slots = 300
	first := scheduleEpoch.Truncate(time.Second).Add(time.Second)
	for i := range slots {
		clk.Advance(time.Second)
		for _, e := range engines {
			e.WakeAll()
		}
		waitForRun(t, engines[i%2], flow.ScheduledRunID("tick", first.Add(time.Duration(i)*time.Second)))
	}
	// Give both schedulers a few more ticks at the final time.
	waitNextAt(t, engines[0], "tick", first.Add(slots*time.Second))
	time.Sleep(50 * time.Millisecond)

	want := slotIDs("tick", first, time.Second, slots)
	for i, e := range engines {
		if got := runIDs(t, e, "echo"); !slices.Equal(got, want) {
			t.Fatalf("engine %d sees %d runs, want %d, one per slot", i, len(got), len(want))
		}
	}
	byWorker := map[string]int{}
	for _, id := range want {
		events, err := engines[0].History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		started := 0
		for _, ev := range events {
			if ev.Kind == flow.EventRunStarted {
				started++
				byWorker[ev.Detail[strings.LastIndex(ev.Detail, " ")+1:]]++
			}
		}
		if started != 1 {
			t.Fatalf("run %s has %d run_started events, want 1", id, started)
		}
	}
	t.Logf("slots started per engine: %v", byWorker)
	eventually(t, "every scheduled run completes", func() bool {
		counts, err := engines[1].CountRuns(ctx)
		return err == nil && counts[flow.StatusCompleted] == slots
	})
	info, err := engines[1].LookupSchedule(ctx, "tick")
	if err != nil {
		t.Fatal(err)
	}
	if !info.LastSlot.Equal(first.Add((slots - 1) * time.Second)) {
		t.Errorf("last slot %s, want %s", info.LastSlot.UTC(), first.Add((slots-1)*time.Second))
	}
	run, err := flow.Lookup(ctx, engines[0], echo, want[0])
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(ctx); err != nil || out != 7 {
		t.Errorf("scheduled run result = %d, %v; want the schedule's input 7", out, err)
	}
}

// After a downtime, the catch-up policy decides which missed slots start;
// then the schedule goes on with its next slot.
func TestScheduleCatchUpAfterDowntime(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)
	minute := func(m int) time.Time { return start.Truncate(time.Minute).Add(time.Duration(m) * time.Minute) }
	tests := []struct {
		name     string
		spec     string
		policy   flow.CatchUp
		downtime time.Duration
		want     []string // runs started when the engine comes back
		nextAt   time.Time
	}{
		// Per-minute schedule down from 00:00:30 to 00:10:30: slots 00:01
		// to 00:10 were missed.
		{"one", "* * * * *", flow.CatchUpOne, 10 * time.Minute,
			[]string{flow.ScheduledRunID("s", minute(10))}, minute(11)},
		{"default is one", "0 * * * * *", "", 10 * time.Minute,
			[]string{flow.ScheduledRunID("s", minute(10))}, minute(11)},
		{"all", "* * * * *", flow.CatchUpAll, 10 * time.Minute,
			slotIDs("s", minute(1), time.Minute, 10), minute(11)},
		{"none", "* * * * *", flow.CatchUpNone, 10 * time.Minute, nil, minute(11)},
		// A per-second schedule 10 minutes behind: 600 missed slots.
		{"one per second", "* * * * * *", flow.CatchUpOne, 10 * time.Minute,
			[]string{flow.ScheduledRunID("s", start.Add(10*time.Minute))}, start.Add(10*time.Minute + time.Second)},
		{"all per second", "* * * * * *", flow.CatchUpAll, 10 * time.Minute,
			slotIDs("s", start.Add(time.Second), time.Second, 600), start.Add(10*time.Minute + time.Second)},
		// More than MaxCatchUpPerTick missed slots take several transactions.
		{"all beyond one tick", "* * * * * *", flow.CatchUpAll, 20 * time.Minute,
			slotIDs("s", start.Add(time.Second), time.Second, 1200), start.Add(20*time.Minute + time.Second)},
		{"none per second", "* * * * * *", flow.CatchUpNone, 10 * time.Minute, nil, start.Add(10*time.Minute + time.Second)},
		// Less than ScheduleGrace behind is late, not missed: every slot
		// starts, whatever the policy.
		{"within grace", "* * * * * *", flow.CatchUpNone, 30 * time.Second,
			slotIDs("s", start.Add(time.Second), time.Second, 30), start.Add(31 * time.Second)},
		{"every", "@every 2m", flow.CatchUpAll, 10*time.Minute + time.Second,
			slotIDs("s", start.Add(2*time.Minute), 2*time.Minute, 5), start.Add(12 * time.Minute)},
		{"every one", "@every 2m", flow.CatchUpOne, 10*time.Minute + time.Second,
			[]string{flow.ScheduledRunID("s", start.Add(10*time.Minute))}, start.Add(12 * time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := waitCtx(t)
			path := dbPath(t)
			clk := clock.NewManual(start)

			// The first process declares the schedule, runs a while, and stops
			// before the first slot. The workflow is registered nowhere: its
			// runs are recorded anyway and wait for an engine that has it.
			// Through openEngine, so that both processes share the suite's
			// backend: on PostgreSQL a SQLite "before" left "after" an
			// empty schema.
			before := openEngine(t, path, scheduleConfig(clk, "before"))
			err := flow.Schedule(ctx, before, "s", tt.spec, echo, 1, &flow.ScheduleOptions{CatchUp: tt.policy})
			if err != nil {
				before.Close()
				t.Fatal(err)
			}
			startEngine(t, before)
			time.Sleep(30 * time.Millisecond)
			if err := before.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			before.Close()

			clk.Advance(tt.downtime)
			after := openEngine(t, path, scheduleConfig(clk, "after"))
			startEngine(t, after)
			waitNextAt(t, after, "s", tt.nextAt)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if got := runIDs(t, after, "echo"); !slices.Equal(got, want) {
				t.Fatalf("runs after downtime: %d %.3q, want %d %.3q", len(got), got, len(want), want)
			}

			// Back on time, the next slot starts normally.
			clk.Set(tt.nextAt.Add(100 * time.Millisecond))
			waitForRun(t, after, flow.ScheduledRunID("s", tt.nextAt))
			if got := len(runIDs(t, after, "echo")); got != len(want)+1 {
				t.Fatalf("after the next slot: %d runs, want %d", got, len(want)+1)
			}
		})
	}
}

// A paused schedule starts nothing; resuming applies the catch-up policy to
// the slots that came due while it was paused, at once.
func TestSchedulePauseResume(t *testing.T) {
	t.Parallel()
	first := scheduleEpoch.Truncate(time.Second).Add(time.Second)
	sec := func(n int) time.Time { return first.Add(time.Duration(n-1) * time.Second) }
	tests := []struct {
		policy flow.CatchUp
		want   []string // runs started by the resume
	}{
		{flow.CatchUpOne, []string{flow.ScheduledRunID("beat", sec(11))}},
		{flow.CatchUpAll, slotIDs("beat", sec(2), time.Second, 10)},
		{flow.CatchUpNone, nil},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy), func(t *testing.T) {
			t.Parallel()
			ctx := waitCtx(t)
			clk := clock.NewManual(scheduleEpoch)
			e := openEngine(t, dbPath(t), scheduleConfig(clk, "w"))
			flow.Register(e, echo)
			if err := flow.Schedule(ctx, e, "beat", "* * * * * *", echo, 1, &flow.ScheduleOptions{CatchUp: tt.policy}); err != nil {
				t.Fatal(err)
			}
			startEngine(t, e)
			clk.Advance(time.Second)
			waitForRun(t, e, flow.ScheduledRunID("beat", sec(1)))

			if err := e.PauseSchedule(ctx, "beat"); err != nil {
				t.Fatal(err)
			}
			if err := e.PauseSchedule(ctx, "beat"); err != nil {
				t.Fatalf("pausing a paused schedule: %v", err)
			}
			if info, _ := e.LookupSchedule(ctx, "beat"); !info.Paused {
				t.Fatal("schedule not reported paused")
			}
			for range 10 { // slots 2 to 11 come due while paused
				clk.Advance(time.Second)
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // several scheduler ticks
			if got := runIDs(t, e, "echo"); len(got) != 1 {
				t.Fatalf("paused schedule started runs: %q", got)
			}

			if err := e.ResumeSchedule(ctx, "beat"); err != nil {
				t.Fatal(err)
			}
			want := append(slices.Clone(tt.want), flow.ScheduledRunID("beat", sec(1)))
			slices.Sort(want)
			if got := runIDs(t, e, "echo"); !slices.Equal(got, want) {
				t.Fatalf("after resume: %q, want %q", got, want)
			}
			if err := e.ResumeSchedule(ctx, "beat"); err != nil {
				t.Fatalf("resuming a running schedule: %v", err)
			}
			info, err := e.LookupSchedule(ctx, "beat")
			if err != nil {
				t.Fatal(err)
			}
			if info.Paused || !info.NextAt.Equal(sec(12)) {
				t.Fatalf("after resume: paused %v, next %s; want running, next %s", info.Paused, info.NextAt.UTC(), sec(12))
			}

			clk.Advance(time.Second)
			waitForRun(t, e, flow.ScheduledRunID("beat", sec(12)))
			if got := len(runIDs(t, e, "echo")); got != len(want)+1 {
				t.Fatalf("after the next slot: %d runs, want %d", got, len(want)+1)
			}
		})
	}
}

// Declaring a schedule again updates it in place, keeping its pause state,
// and its next slot unless the spec changed; deleting keeps its runs.
func TestScheduleUpdateListDelete(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	clk := clock.NewManual(scheduleEpoch)
	e := openEngine(t, dbPath(t), scheduleConfig(clk, "w"))

	if err := flow.Schedule(ctx, e, "b", "@hourly", echo, 1, nil); err != nil {
		t.Fatal(err)
	}
	err := flow.Schedule(ctx, e, "a", "*/10 * * * * *", echo, 1, &flow.ScheduleOptions{Queue: "reports", Priority: 3, CatchUp: flow.CatchUpAll})
	if err != nil {
		t.Fatal(err)
	}
	list, err := e.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "a" || list[1].Name != "b" {
		t.Fatalf("schedules = %+v, want a and b", list)
	}
	a := list[0]
	if a.Workflow != "echo" || a.Version != 1 || a.Queue != "reports" || a.Priority != 3 ||
		a.CatchUp != flow.CatchUpAll || a.Paused || string(a.Input) != "1" || a.Spec != "*/10 * * * * *" ||
		!a.NextAt.Equal(scheduleEpoch.Truncate(time.Second).Add(10*time.Second)) || !a.LastSlot.IsZero() {
		t.Fatalf("schedule a = %+v", a)
	}
	if b := list[1]; b.Queue != flow.DefaultQueue || b.CatchUp != flow.CatchUpOne ||
		!b.NextAt.Equal(scheduleEpoch.Truncate(time.Hour).Add(time.Hour)) {
		t.Fatalf("schedule b = %+v", b)
	}

	// Same spec later: the next slot stays, the rest is updated.
	clk.Advance(time.Minute)
	if err := e.PauseSchedule(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := flow.Schedule(ctx, e, "a", "*/10 * * * * *", echo, 2, nil); err != nil {
		t.Fatal(err)
	}
	got, err := e.LookupSchedule(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if !got.NextAt.Equal(a.NextAt) || !got.Paused || string(got.Input) != "2" || got.Queue != flow.DefaultQueue || got.CatchUp != flow.CatchUpOne {
		t.Fatalf("after redeclaring: %+v; want next slot %s kept, still paused, input 2", got, a.NextAt)
	}
	// Another spec: the next slot follows it from now.
	if err := flow.Schedule(ctx, e, "a", "30 * * * *", echo, 2, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.LookupSchedule(ctx, "a"); !got.NextAt.Equal(scheduleEpoch.Truncate(time.Hour).Add(30 * time.Minute)) {
		t.Fatalf("after changing the spec: next slot %s", got.NextAt.UTC())
	}

	if err := e.DeleteSchedule(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if list, _ := e.Schedules(ctx); len(list) != 1 || list[0].Name != "b" {
		t.Fatalf("after delete: %+v", list)
	}
	if err := e.DeleteSchedule(ctx, "a"); !errors.Is(err, flow.ErrScheduleNotFound) {
		t.Fatalf("delete twice: %v, want ErrScheduleNotFound", err)
	}
}

// A spec that does not parse, or never fires, is refused with an error that
// names it, and nothing is stored.
func TestScheduleBadInput(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), scheduleConfig(clock.NewManual(scheduleEpoch), "w"))
	for _, spec := range []string{"", "* * *", "61 * * * *", "* * * * * * * *", "@fortnightly", "0 0 30 2 *", "CRON_TZ=Mars/Olympus * * * * *"} {
		err := flow.Schedule(ctx, e, "s", spec, echo, 1, nil)
		if !errors.Is(err, flow.ErrBadSpec) {
			t.Errorf("spec %q: error %v, want ErrBadSpec", spec, err)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", spec)) || !strings.Contains(err.Error(), "schedule s") {
			t.Errorf("spec %q: error %q does not name the spec and the schedule", spec, err)
		}
	}
	if err := flow.Schedule(ctx, e, "s", "@daily", echo, 1, &flow.ScheduleOptions{CatchUp: "sometimes"}); err == nil || !strings.Contains(err.Error(), "sometimes") {
		t.Errorf("unknown catch-up policy: error %v", err)
	}
	if err := flow.Schedule(ctx, e, "", "@daily", echo, 1, nil); err == nil {
		t.Error("empty name: no error")
	}
	if err := flow.Schedule(ctx, e, "s", "@daily", flow.Workflow[int, int]{Run: echo.Run}, 1, nil); err == nil {
		t.Error("empty workflow name: no error")
	}
	unencodable := flow.Workflow[chan int, int]{Name: "chan", Run: func(flow.Context, chan int) (int, error) { return 0, nil }}
	if err := flow.Schedule(ctx, e, "s", "@daily", unencodable, make(chan int), nil); err == nil {
		t.Error("input that does not encode: no error")
	}
	if list, err := e.Schedules(ctx); err != nil || len(list) != 0 {
		t.Fatalf("schedules after bad input = %+v, %v; want none", list, err)
	}
	// Time zones and all the spec forms are accepted.
	for _, spec := range []string{"CRON_TZ=Europe/Paris 0 9 * * 1-5", "TZ=UTC 0 9 * * *", "@every 1h30m", "0 0 1 1 *", "@yearly"} {
		if err := flow.Schedule(ctx, e, "ok", spec, echo, 1, nil); err != nil {
			t.Errorf("spec %q: %v", spec, err)
		}
	}
}

// An unknown schedule name is ErrScheduleNotFound, naming it.
func TestScheduleUnknownName(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	ops := map[string]func() error{
		"pause":  func() error { return e.PauseSchedule(ctx, "nope") },
		"resume": func() error { return e.ResumeSchedule(ctx, "nope") },
		"delete": func() error { return e.DeleteSchedule(ctx, "nope") },
		"lookup": func() error { _, err := e.LookupSchedule(ctx, "nope"); return err },
	}
	for name, op := range ops {
		err := op()
		if !errors.Is(err, flow.ErrScheduleNotFound) || !strings.Contains(err.Error(), "nope") {
			t.Errorf("%s: error %v, want ErrScheduleNotFound naming the schedule", name, err)
		}
	}
}

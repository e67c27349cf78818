package flowtest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// The clock starts where WithInitialTime says, and everything the engine
// records counts from there: the run's creation, flow.Now in the body,
// and a delayed start, which Await passes.
func TestWithInitialTimeStartsTheClockThere(t *testing.T) {
	t.Parallel()
	start := time.Date(2031, 2, 28, 23, 59, 30, 0, time.UTC)
	env := flowtest.New(t, nil, flowtest.WithInitialTime(start))
	if got := env.Now(); !got.Equal(start) {
		t.Fatalf("Now = %s, want %s", got, start)
	}
	wf := flow.Workflow[int, time.Time]{Name: "month_end", Run: func(wc flow.Context, _ int) (time.Time, error) {
		return flow.Now(wc)
	}}
	run := flowtest.Start(env, wf, 1, &flow.StartOptions{Delay: time.Minute})
	now, err := flowtest.Await(env, run)
	if err != nil {
		t.Fatal(err)
	}
	// The delay crosses into March.
	if want := start.Add(time.Minute); !now.Equal(want) || now.Month() != time.March {
		t.Fatalf("flow.Now in the body = %s, want %s", now, want)
	}
	if info := env.Inspect(run.ID()); !info.CreatedAt.Equal(start) {
		t.Fatalf("run created at %s, want the initial time %s", info.CreatedAt, start)
	}
}

// Without the option the clock starts at 2025-01-01, as before.
func TestTheClockStartsAt2025ByDefault(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	if want := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC); !env.Now().Equal(want) {
		t.Fatalf("Now = %s, want %s", env.Now(), want)
	}
}

// A time the engine cannot keep fails the test at New with the reason, and
// opens nothing.
func TestWithInitialTimeRefusesTimesItCannotKeep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		start time.Time
		want  string
	}{
		{time.Time{}, "the zero time"},
		{time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), "before 1970"},
		{time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), "the year 3000"},
	} {
		ft := &fatalTB{TB: t}
		msg := ft.catch(func() { flowtest.New(ft, nil, flowtest.WithInitialTime(tc.start)) })
		if !strings.Contains(msg, "WithInitialTime") || !strings.Contains(msg, tc.want) {
			t.Errorf("New with %s failed with %q, want it to name WithInitialTime and %q", tc.start, msg, tc.want)
		}
	}
}

package flowtest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// A cancellation scope under the test clock: a branch's 24h timer is
// cancelled by a sibling once its own 10m timer fires, so Await moves the
// clock by 10 minutes, not a day; the exported history then replays clean
// from a file.
func TestAwaitPassesATimerCancelledByItsScope(t *testing.T) {
	t.Parallel()
	env := quickEnv(t)
	wf := flow.Workflow[string, string]{Name: "scoped_timer", Run: func(wc flow.Context, s string) (string, error) {
		sc, cancel := flow.WithCancel(wc)
		got, err := flow.All(sc,
			func(b flow.Context) (string, error) {
				err := flow.Sleep(b, 24*time.Hour)
				if errors.Is(err, flow.ErrScopeCancelled) {
					return "day cancelled", nil
				}
				return "day passed", err
			},
			func(b flow.Context) (string, error) {
				if err := flow.Sleep(b, 10*time.Minute); err != nil {
					return "", err
				}
				cancel()
				return "cancelled it", nil
			})
		if err != nil {
			return "", err
		}
		return flow.Do(wc, echo, s+": "+got[0]+", "+got[1])
	}}
	start, realStart := env.Now(), time.Now()
	out, run, err := flowtest.RunWorkflow(env, wf, "scope")
	if err != nil || out != "scope: day cancelled, cancelled it" {
		t.Fatalf("RunWorkflow = %q, %v", out, err)
	}
	checkClock(t, env, start, 10*time.Minute, realStart)
	if moved := env.Now().Sub(start); moved >= 24*time.Hour {
		t.Fatalf("clock moved %s: the cancelled timer was waited out", moved)
	}

	h, err := env.Engine.ExportHistory(context.Background(), run.ID())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "scoped.json")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Write(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	report, err := flowtest.ReplayFile(flowtest.New(t, nil), wf, file)
	if err != nil || !report.Returned {
		t.Fatalf("ReplayFile: %+v, %v", report, err)
	}
}

// flow.Timeout on the test clock: a function that finishes in time keeps
// its result and the clock does not wait out the timeout; one that waits
// past it ends with an error matching flow.ErrScopeCancelled once the
// clock passed it, and the run goes on.
func TestTimeoutIsADurableTimer(t *testing.T) {
	t.Parallel()
	env := quickEnv(t)
	wf := flow.Workflow[bool, string]{Name: "timeout", Run: func(wc flow.Context, waitForever bool) (string, error) {
		got, err := flow.Timeout(wc, time.Hour, func(sc flow.Context) (string, error) {
			if waitForever {
				return flow.Receive[string](sc, "never", 0)
			}
			return flow.Do(sc, echo, "in time")
		})
		if errors.Is(err, flow.ErrScopeCancelled) {
			return flow.Do(wc, echo, "timed out: "+err.Error())
		}
		return got, err
	}}
	start, realStart := env.Now(), time.Now()
	out, _, err := flowtest.RunWorkflow(env, wf, false)
	if err != nil || out != "in time" {
		t.Fatalf("in time: %q, %v", out, err)
	}
	if moved := env.Now().Sub(start); moved >= time.Hour {
		t.Fatalf("clock moved %s for a function that finished at once", moved)
	}
	start = env.Now()
	out, run, err := flowtest.RunWorkflow(env, wf, true)
	if err != nil || !strings.HasPrefix(out, "timed out: timed out after 1h0m0s: ") || !strings.HasSuffix(out, "scope cancelled") {
		t.Fatalf("waiting forever: %q, %v", out, err)
	}
	checkClock(t, env, start, time.Hour, realStart)

	h, err := env.Engine.ExportHistory(context.Background(), run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if report, err := flowtest.Replay(flowtest.New(t, nil), wf, h); err != nil || !report.Returned {
		t.Fatalf("Replay: %+v, %v", report, err)
	}
}

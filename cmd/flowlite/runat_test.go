package main

import (
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

func TestRunAt(t *testing.T) {
	t.Parallel()
	path := delayedFixture(t)

	before := decode[runDetailJSON](t, ok(t, path, "show", "--json", delayedRun))
	out := ok(t, path, "run-at", delayedRun, "3h")
	if !strings.Contains(out, "run delayed-1 is due at ") || !strings.Contains(out, "(it was due at "+before.RunAt.UTC().Format(time.RFC3339Nano)+")") {
		t.Errorf("run-at 3h: %q", out)
	}
	after := decode[runDetailJSON](t, ok(t, path, "show", "--json", delayedRun))
	if left := time.Until(after.RunAt); left < 2*time.Hour+50*time.Minute || left > 3*time.Hour {
		t.Errorf("run-at 3h: due in %s", left)
	}
	events := decode[[]eventJSON](t, ok(t, path, "history", "--json", delayedRun))
	if last := events[len(events)-1]; last.Kind != flow.EventRunRescheduled || !strings.Contains(last.Detail, "was due at") {
		t.Errorf("history after run-at: %+v", last)
	}
	at := time.Now().Add(30 * time.Minute).UTC().Truncate(time.Second)
	act := decode[actionJSON](t, ok(t, path, "run-at", "--json", delayedRun, at.Format(time.RFC3339)))
	if act.Action != "run-at" || act.Status != flow.StatusPending || !strings.Contains(act.Message, at.Format(time.RFC3339Nano)) {
		t.Errorf("run-at --json %s: %+v", at.Format(time.RFC3339), act)
	}
	// now (or any time passed) is run-now.
	ok(t, path, "run-at", delayedRun, "now")
	if events := decode[[]eventJSON](t, ok(t, path, "history", "--json", delayedRun)); events[len(events)-1].Kind != flow.EventRunMadeDue {
		t.Errorf("history after run-at now: %+v", events[len(events)-1])
	}

	// Refusals change nothing.
	for _, tc := range []struct{ id, want string }{
		{doneRun, "run already finished: run is completed"},
		{stuckRun, "run is suspended, not pending"},
	} {
		beforeHistory := ok(t, path, "history", "--json", tc.id)
		fails(t, exitError, tc.want, "--db", path, "run-at", tc.id, "1h")
		if got := ok(t, path, "history", "--json", tc.id); got != beforeHistory {
			t.Errorf("refused run-at of %s changed its history", tc.id)
		}
	}
	fails(t, exitError, "run nope: not found", "--db", path, "run-at", "nope", "1h")
	fails(t, exitUsage, `invalid due time "soonish"`, "--db", path, "run-at", delayedRun, "soonish")
	fails(t, exitUsage, "expected a run ID and a due time", "--db", path, "run-at", delayedRun)
}

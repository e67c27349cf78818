package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/fixture"
)

// delayedRun is a run of the fixture database due in an hour, which
// delayedFixture adds.
const delayedRun = "delayed-1"

func delayedFixture(t *testing.T) string {
	t.Helper()
	path := fixtureDB(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	e, err := flowsqlite.Open(ctx, path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	flow.Register(e, fixture.DoneWorkflow)
	if _, err := flow.Start(ctx, e, fixture.DoneWorkflow, fixture.Order{Item: "chair"}, &flow.StartOptions{RunID: delayedRun, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDelete(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)

	out := ok(t, path, "delete", doneRun)
	if out != "run done-1 deleted (it was completed), with its steps and history\n" {
		t.Errorf("delete: %q", out)
	}
	fails(t, exitError, "run done-1: not found", "--db", path, "show", doneRun)

	act := decode[deleteJSON](t, ok(t, path, "delete", "--json", sagaRun))
	if act.Run != sagaRun || act.Action != "delete" || act.Was != flow.StatusFailed {
		t.Errorf("delete --json: %+v", act)
	}

	// Unfinished runs are refused, and nothing changes.
	for _, id := range []string{pendingRun, stuckRun} {
		before := ok(t, path, "show", "--json", id)
		r := fails(t, exitError, "not finished", "--db", path, "delete", id)
		if !strings.Contains(r.stderr, "delete run "+id) || !strings.Contains(r.stderr, "cancel it first") {
			t.Errorf("delete %s: %q", id, r.stderr)
		}
		if after := ok(t, path, "show", "--json", id); after != before {
			t.Errorf("refused delete of %s changed it", id)
		}
	}
	fails(t, exitError, "run nope: not found", "--db", path, "delete", "nope")
	fails(t, exitUsage, "missing run ID", "--db", path, "delete")
}

func TestRunNow(t *testing.T) {
	t.Parallel()
	path := delayedFixture(t)

	before := decode[runDetailJSON](t, ok(t, path, "show", "--json", delayedRun))
	out := ok(t, path, "run-now", delayedRun)
	if !strings.Contains(out, "run delayed-1 is due now (it was due at ") || !strings.Contains(out, `queue "default"`) {
		t.Errorf("run-now: %q", out)
	}
	after := decode[runDetailJSON](t, ok(t, path, "show", "--json", delayedRun))
	if !after.RunAt.Before(before.RunAt) || time.Until(after.RunAt) > time.Minute {
		t.Errorf("run-now: due at %s, was %s; want now", after.RunAt, before.RunAt)
	}
	if events := decode[[]eventJSON](t, ok(t, path, "history", "--json", delayedRun)); events[len(events)-1].Kind != flow.EventRunMadeDue {
		t.Errorf("history after run-now: %+v", events)
	}
	act := decode[actionJSON](t, ok(t, path, "run-now", "--json", delayedRun))
	if act.Action != "run-now" || act.Status != flow.StatusPending || !strings.Contains(act.Message, "due already") {
		t.Errorf("run-now --json of a due run: %+v", act)
	}

	// Refusals change nothing.
	for _, tc := range []struct{ id, want string }{
		{doneRun, "run already finished: run is completed"},
		{stuckRun, "run is suspended, not pending"},
	} {
		beforeHistory := ok(t, path, "history", "--json", tc.id)
		fails(t, exitError, tc.want, "--db", path, "run-now", tc.id)
		if got := ok(t, path, "history", "--json", tc.id); got != beforeHistory {
			t.Errorf("refused run-now of %s changed its history", tc.id)
		}
	}
	fails(t, exitError, "run nope: not found", "--db", path, "run-now", "nope")
}

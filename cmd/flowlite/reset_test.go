package main

import (
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

func TestResetForkRevive(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)

	// Refusals change nothing.
	for _, tc := range []struct {
		args []string
		id   string
		want string
	}{
		{[]string{"reset", doneRun, "nope"}, doneRun, "never reached step nope#0: its calls are reserve#0, ship#0"},
		{[]string{"reset", pendingRun, "reserve"}, pendingRun, "never reached step reserve#0: it has no calls"},
		{[]string{"reset", sagaRun, "charge"}, sagaRun, "step reserve#0 before charge#0 was compensated"},
		{[]string{"fork", sagaRun, "ship#0"}, sagaRun, "step reserve#0 before ship#0 was compensated"},
		{[]string{"revive", stuckRun}, stuckRun, "run is suspended: resume it instead"},
		{[]string{"revive", doneRun}, doneRun, "run is completed: reset it from one of its calls"},
	} {
		before := ok(t, path, "history", "--json", tc.id)
		fails(t, exitError, tc.want, append([]string{"--db", path}, tc.args...)...)
		if after := ok(t, path, "history", "--json", tc.id); after != before {
			t.Errorf("refused %v changed the history", tc.args)
		}
	}
	fails(t, exitError, "run nope: not found", "--db", path, "reset", "nope", "reserve")
	fails(t, exitError, "run nope: not found", "--db", path, "revive", "nope")
	fails(t, exitUsage, "expected a run ID and a step", "--db", path, "reset", doneRun)
	fails(t, exitUsage, "expected a run ID and a step", "--db", path, "fork", doneRun)

	out := ok(t, path, "reset", doneRun, "ship")
	if !strings.Contains(out, `run done-1 from ship#0 (step "ship"); kept 1 calls; runs again: ship#0; now pending`) {
		t.Errorf("reset: %q", out)
	}
	if show := decode[runDetailJSON](t, ok(t, path, "show", "--json", doneRun)); show.Status != flow.StatusPending {
		t.Errorf("after reset: %s", show.Status)
	}

	fork := decode[resetJSON](t, ok(t, path, "fork", "--json", sagaRun, "reserve"))
	if fork.Fork != sagaRun+"/fork-1" || fork.Status != flow.StatusPending || len(fork.Copied) != 0 ||
		!strings.Contains(fork.Message, "forked as saga-1/fork-1 from reserve#0") {
		t.Errorf("fork --json: %+v", fork)
	}
	if events := decode[[]eventJSON](t, ok(t, path, "history", "--json", sagaRun)); events[len(events)-1].Kind != flow.EventRunForked {
		t.Errorf("the forked run's last event: %+v", events[len(events)-1])
	}

	revived := decode[resetJSON](t, ok(t, path, "revive", "--json", sagaRun))
	if revived.Status != flow.StatusPending || !strings.Contains(revived.From, "revived (it was failed) from reserve#0") ||
		strings.Join(revived.Discarded, " ") != "reserve#0 ship#0 charge#0" {
		t.Errorf("revive --json: %+v", revived)
	}
}

package dashboard

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// The actions that move a run in the queue or back in its history: a new
// due time for a pending run (run-at), a reset of a run to one of its
// steps and a fork of a run from one (offered on each step row), and the
// revival of a cancelled run or a dead letter under its own ID.

// inputError is a value the operator typed that the action cannot use: a
// 400, not a refusal of the engine's.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

// parseDue reads a due time: an RFC 3339 time, or a duration from now
// ("90s", "2h").
func parseDue(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, &inputError{fmt.Sprintf("Invalid due time %q: give a time such as 2025-06-01T12:00:00Z, or a duration from now such as 90s or 2h.", s)}
	}
	return t, nil
}

func (d *Dashboard) runOpsActions() []action {
	return []action{{
		Name: "run-at", Label: "Change due time", Confirm: "Change when this run is due?",
		Explain: "The pending run (delayed, backing off before the next attempt of a step, or due and not claimed yet) becomes due at the time you give, earlier or later; its attempt count does not change. A time in the past makes it due now. If an engine claims the run meanwhile, nothing changes and you are told so.",
		Done:    "Due time changed.",
		Input:   &actionInput{Name: "at", Label: "New due time", Hint: "An RFC 3339 time (2025-06-01T12:00:00Z) or a duration from now (90s, 2h)."},
		applies: func(r flow.RunInfo) bool { return r.Status == flow.StatusPending },
		with: func(ctx context.Context, e *flow.Engine, id, v string) (string, error) {
			at, err := parseDue(strings.TrimSpace(v), d.now())
			if err != nil {
				return "", err
			}
			return id, e.RunAt(ctx, id, at)
		},
	}}
}

// branchCall matches the calls of a parallel call's branches (All, First)
// and of cancellation scopes, which a reset or fork cannot start from.
var branchCall = regexp.MustCompile(`^(?:(all|first)\d+\.\d+|scope\d+)/`)

// topLevelCall reports whether a step call is one of the workflow body
// itself, from which a run can be reset or forked.
func topLevelCall(name string) bool { return !branchCall.MatchString(name) }

// resettable says whether Reset may take run: finished and not requeued,
// suspended, or pending or waiting (the engine refuses one it holds).
func resettable(r flow.RunInfo) bool {
	switch r.Status {
	case flow.StatusCompleted, flow.StatusCancelled, flow.StatusSuspended, flow.StatusPending, flow.StatusWaiting:
		return true
	case flow.StatusFailed:
		return r.RequeuedAs == ""
	}
	return false
}

func (d *Dashboard) goBackActions() []action {
	return []action{{
		Name: "reset", Label: "Reset from here", Confirm: "Reset this run to this step?", Danger: true, PerStep: true,
		Explain: "The run goes back to this step under its own ID: the records of the steps before it are kept and replay as recorded; this step and every one after it run again, and the run is pending, due now, with no outcome. Signals the discarded receives took are delivered again. A run an engine executes or unwinds is refused, and so is a step after one whose compensation ran.",
		Done:    "Run reset: an engine working its queue takes it within its poll interval.",
		Input:   &actionInput{Name: "step", Label: "Step", Fixed: true},
		applies: resettable,
		with: func(ctx context.Context, e *flow.Engine, id, step string) (string, error) {
			return id, e.Reset(ctx, id, step)
		},
	}, {
		Name: "fork", Label: "Fork from here", Confirm: "Start a new run from this step?", PerStep: true,
		Explain: "A new run (this run's ID plus /fork-N) gets copies of the records of the steps before this one, and runs this step and what follows; it has this run's workflow version, queue, priority and input, and starts children of its own. This run is left as it is.",
		Done:    "Forked: this is the new run.",
		Input:   &actionInput{Name: "step", Label: "Step", Fixed: true},
		applies: func(flow.RunInfo) bool { return true },
		with: func(ctx context.Context, e *flow.Engine, id, step string) (string, error) {
			return e.Fork(ctx, id, step)
		},
	}, {
		Name: "revive", Label: "Revive", Confirm: "Bring this run back under its own ID?",
		Explain: "The run goes back to its first step that did not complete, or whose effect a compensation undid, and runs again from there under its own ID (Retry starts a new run instead); the steps before it replay as recorded.",
		Done:    "Run revived: an engine working its queue takes it within its poll interval.",
		applies: func(r flow.RunInfo) bool {
			return r.Status == flow.StatusCancelled || (r.Status == flow.StatusFailed && r.RequeuedAs == "")
		},
		do: same(d.e.Revive),
	}}
}

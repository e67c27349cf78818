package dashboard

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// The actions that move a run in the queue or back in its history, which
// take a value from the operator: a new due time for a pending run
// (run-at).

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

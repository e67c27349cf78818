package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flowlite/flowlite/flow"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestRunWeek plays the week's story and checks every outcome, when it
// happened on the simulated clock, the services and the printed report.
func TestRunWeek(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "approval.db")
	var stdout bytes.Buffer
	out, err := runApprovals(testContext(t), []string{"-db", path}, &stdout)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}

	// Outcomes, with the moment each run finished on the simulated clock
	// and the error its workflow failed with.
	want := map[string]struct {
		status   flow.RunStatus
		finished time.Duration
		cause    string // prefix of RolledBackError.Cause
	}{
		"exp-001": {flow.StatusCompleted, 2 * time.Hour, ""},
		"exp-002": {flow.StatusFailed, 24 * time.Hour, "rejected by tom: not in this quarter's plan"},
		"exp-003": {flow.StatusFailed, 48 * time.Hour, "no decision from nina within 48 hours"},
		"exp-004": {flow.StatusCompleted, 47*time.Hour + 30*time.Minute, ""},
		"exp-005": {flow.StatusCompleted, 5*time.Hour + 10*time.Minute, ""},
		"exp-006": {flow.StatusFailed, 0, "step reserve_budget failed after 1 attempt(s): reserve €6,400.00 of sales for exp-006: over budget"},
		"exp-007": {flow.StatusFailed, 48 * time.Hour, "no decision from oscar within 48 hours"},
	}
	byID := make(map[string]result)
	for _, r := range out.results {
		byID[r.Expense.ID] = r
		w := want[r.Expense.ID]
		if r.Status != w.status || r.Run.Status != w.status {
			t.Errorf("%s: Result says %s, Inspect %s, want %s (err %v)", r.Expense.ID, r.Status, r.Run.Status, w.status, r.Err)
		}
		if got := r.Run.FinishedAt.Sub(simStart); got != w.finished {
			t.Errorf("%s finished at +%s, want +%s", r.Expense.ID, got, w.finished)
		}
		var rb *flow.RolledBackError
		switch {
		case w.cause == "" && r.Err != nil:
			t.Errorf("%s: err %v", r.Expense.ID, r.Err)
		case w.cause != "" && (!errors.As(r.Err, &rb) || !strings.HasPrefix(rb.Cause, w.cause)):
			t.Errorf("%s: err %v, want a *flow.RolledBackError starting %q", r.Expense.ID, r.Err, w.cause)
		}
	}
	if len(byID) != len(want) {
		t.Fatalf("%d results, want %d", len(byID), len(want))
	}
	if got := out.engine; got[flow.StatusCompleted] != 3 || got[flow.StatusFailed] != 4 || len(got) != 2 {
		t.Errorf("Engine.CountRuns = %v, want 3 completed and 4 failed", got)
	}
	if p := byID["exp-004"].Payout; p.TransferID != "tr-exp-004" || p.Cents != 23_600 || p.ApprovedBy != "sara" ||
		!p.DecidedAt.Equal(simStart.Add(47*time.Hour+30*time.Minute)) {
		t.Errorf("exp-004 payout %+v", p)
	}

	// The managers' signals: the double click is dropped by its key, the
	// late approval is refused.
	var errs []string
	for _, a := range out.actions {
		errs = append(errs, a.Expense+": "+errString(a.Err))
	}
	wantErrs := []string{"exp-001: <nil>", "exp-005: <nil>", "exp-005: <nil>", "exp-002: <nil>", "exp-004: <nil>",
		"exp-007: signal decision to run exp-007: run already finished: run is failed"}
	if !reflect.DeepEqual(errs, wantErrs) {
		t.Errorf("signal errors %q, want %q", errs, wantErrs)
	}
	if !errors.Is(out.actions[5].Err, flow.ErrRunFinished) {
		t.Errorf("late signal: %v, want flow.ErrRunFinished", out.actions[5].Err)
	}
	if got := kinds(byID["exp-005"], flow.EventSignalSent, flow.EventSignalReceived); !reflect.DeepEqual(got, []string{"signal_sent", "signal_received"}) {
		t.Errorf("exp-005 signal events %q, want one sent, one received", got)
	}

	// The timeout: the wait was due at exactly 48 hours, then the
	// compensations ran in reverse order.
	if got := kinds(byID["exp-003"], flow.EventSignalWaiting, flow.EventSignalTimedOut, flow.EventCompensationCompleted); !reflect.DeepEqual(got,
		[]string{"signal_waiting", "signal_timed_out", "compensation_completed notify_manager", "compensation_completed reserve_budget"}) {
		t.Errorf("exp-003 events %q", got)
	}
	// Over budget: nothing completed, so nothing was compensated.
	if got := kinds(byID["exp-006"], flow.EventStepFailed, flow.EventCompensationStarted, flow.EventRunFailed); !reflect.DeepEqual(got,
		[]string{"step_failed reserve_budget", "run_failed"}) {
		t.Errorf("exp-006 events %q", got)
	}

	// The services.
	svc := out.svc
	gotBudget := make(map[string]int64)
	for _, d := range svc.budget.Departments() {
		gotBudget[d.Department] = d.Used
	}
	if want := map[string]int64{"engineering": 4250, "sales": 23_600 + 61_200}; !reflect.DeepEqual(gotBudget, want) {
		t.Errorf("budget used %v, want %v", gotBudget, want)
	}
	calls := map[string]int{"exp-001": 1, "exp-004": 1, "exp-005": 2}
	for _, x := range expenses {
		if got := svc.bank.Calls(x.ID); got != calls[x.ID] {
			t.Errorf("%s: %d bank calls, want %d", x.ID, got, calls[x.ID])
		}
	}
	tasks := map[string]string{
		"exp-001": taskDecided, "exp-002": taskDecided, "exp-003": taskWithdrawn, "exp-004": taskDecided,
		"exp-005": taskDecided, "exp-006": "", "exp-007": taskWithdrawn,
	}
	for id, st := range tasks {
		got := ""
		for _, s := range svc.inbox.Tasks(id) {
			got = s
		}
		if got != st {
			t.Errorf("%s: task %q, want %q", id, got, st)
		}
	}
	if problems := out.check(); len(problems) > 0 {
		t.Errorf("check: %q", problems)
	}

	// The report.
	text := stdout.String()
	for _, re := range []string{
		`database: ` + regexp.QuoteMeta(path) + ` \(kept\)`,
		`(?m)^72 simulated hours passed in \d+ms of real time; times below are since Mon 2025-03-03 09:00 UTC\.$`,
		`(?m)^  \+5h00m02s  sara +exp-005  approve +accepted, dropped: same key \(History: 1 signal_sent\)$`,
		`(?m)^ +\+50h00m  oscar +exp-007  approve +refused: signal decision to run exp-007: run already finished: run is failed$`,
		`(?m)^  exp-003  carol +€389\.00  nina +rolled back  \+48h00m  no decision from nina within 48 hours$`,
		`(?m)^  exp-005  erin +€612\.00  sara +paid +\+5h10m  tr-exp-005, approved by sara$`,
		`(?m)^  paid +3 +3$`,
		`(?m)^  rolled back +4 +4$`,
		`(?m)^  engineering  €5,000\.00 +€42\.50  €4,957\.50 +1$`,
		`(?m)^Bank: 3 transfers, €890\.50 in total\.$`,
		`(?m)^Timeline of exp-003, no decision`,
		`(?m)^ +\+0  signal_waiting +flow\.receive:decision +signal decision, timeout 48h0m0s$`,
		`(?m)^  \+48h00m  signal_timed_out +flow\.receive:decision`,
		`(?m)^  \+48h00m  compensation_completed +reserve_budget +1$`,
		`(?m)^  \+5h00m  step_retried +pay_out +1  bank API: 503 service unavailable; next attempt in 10m0s$`,
		`(?m)^  \+5h10m  step_completed +pay_out +2$`,
		`(?m)^Consistency: OK`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("output does not match %s", re)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
}

// kinds returns the run's events of the given kinds, with their step.
func kinds(r result, of ...string) []string {
	var out []string
	for _, ev := range r.Events {
		for _, k := range of {
			if ev.Kind == k {
				s := ev.Kind
				if ev.Step != "" && !strings.HasPrefix(ev.Step, "flow.") {
					s += " " + ev.Step
				}
				out = append(out, s)
			}
		}
	}
	return out
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestRunTempDatabase checks the default database: a temporary file,
// printed, and removed at exit unless -keep.
func TestRunTempDatabase(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		var args []string
		if keep {
			args = append(args, "-keep")
		}
		var stdout bytes.Buffer
		if err := run(testContext(t), args, &stdout); err != nil {
			t.Fatalf("run %q: %v", args, err)
		}
		m := regexp.MustCompile(`(?m)^database: (\S+) `).FindStringSubmatch(stdout.String())
		if m == nil {
			t.Fatalf("run %q printed no database path:\n%s", args, stdout.String())
		}
		_, err := os.Stat(m[1])
		switch {
		case keep && err != nil:
			t.Errorf("-keep: database %s: %v", m[1], err)
		case !keep && !errors.Is(err, os.ErrNotExist):
			t.Errorf("database %s still exists (err %v)", m[1], err)
		}
		if keep {
			if err := os.RemoveAll(filepath.Dir(m[1])); err != nil {
				t.Error(err)
			}
		}
	}
}

func TestRunRefusesUsedDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "approval.db")
	args := []string{"-db", path}
	if err := run(testContext(t), args, &bytes.Buffer{}); err != nil {
		t.Fatalf("first run: %v", err)
	}
	err := run(testContext(t), args, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "already holds a run exp-001") {
		t.Fatalf("second run on the same database: err %v, want one saying it already holds the run", err)
	}
}

func TestRunBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-nope"}, {"extra"}} {
		if err := run(testContext(t), args, &bytes.Buffer{}); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
	if err := run(testContext(t), []string{"-h"}, &bytes.Buffer{}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("run -h: err %v, want flag.ErrHelp", err)
	}
}

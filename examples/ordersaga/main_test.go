package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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

// TestRunTwentyOrders runs the default story and checks every outcome, the
// simulated services and the printed report.
func TestRunTwentyOrders(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "orders.db")
	var stdout bytes.Buffer
	out, err := runSaga(testContext(t), []string{"-db", path, "-orders", "20"}, &stdout)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}

	// Outcomes, as Run.Result and Engine.CountRuns tell them.
	wantStatus := map[string]flow.RunStatus{
		"order-003": flow.StatusSuspended, // mallory, oslo: declined, release fails
		"order-007": flow.StatusFailed,    // erin: parcel refused, refunded
		"order-010": flow.StatusFailed,    // mallory: declined
		"order-014": flow.StatusFailed,    // erin
		"order-017": flow.StatusFailed,    // mallory
	}
	counts := map[flow.RunStatus]int64{}
	for _, r := range out.results {
		want, ok := wantStatus[r.Order.ID]
		if !ok {
			want = flow.StatusCompleted
		}
		if r.Status != want {
			t.Errorf("%s (%s at %s): status %s, want %s (err %v)", r.Order.ID, r.Order.Customer, r.Order.Warehouse, r.Status, want, r.Err)
		}
		counts[r.Status]++
	}
	want := map[flow.RunStatus]int64{flow.StatusCompleted: 15, flow.StatusFailed: 4, flow.StatusSuspended: 1}
	for _, st := range []flow.RunStatus{flow.StatusCompleted, flow.StatusFailed, flow.StatusSuspended} {
		if counts[st] != want[st] {
			t.Errorf("Run.Result: %d %s, want %d", counts[st], st, want[st])
		}
		if out.engine[st] != want[st] {
			t.Errorf("Engine.CountRuns: %d %s, want %d", out.engine[st], st, want[st])
		}
	}
	for st, n := range out.engine {
		if n != 0 && want[st] == 0 {
			t.Errorf("Engine.CountRuns: %d %s, want none", n, st)
		}
	}

	// The errors Result returned.
	byID := map[string]result{}
	for _, r := range out.results {
		byID[r.Order.ID] = r
	}
	var susp *flow.SuspendedError
	if err := byID["order-003"].Err; !errors.As(err, &susp) || !errors.Is(err, flow.ErrSuspended) {
		t.Fatalf("order-003: err %v, want a *flow.SuspendedError", err)
	}
	if want := "compensation of step reserve_inventory failed after 3 attempt(s): release stock at oslo"; !strings.HasPrefix(susp.Reason, want) {
		t.Errorf("suspended reason %q, want it to start with %q", susp.Reason, want)
	}
	var rb *flow.RolledBackError
	if err := byID["order-010"].Err; !errors.As(err, &rb) || !strings.Contains(rb.Cause, "card declined") {
		t.Errorf("order-010: err %v, want a *flow.RolledBackError for a declined card", err)
	}
	if err := byID["order-007"].Err; !errors.As(err, &rb) || !strings.Contains(rb.Cause, "step ship_order failed") {
		t.Errorf("order-007: err %v, want a *flow.RolledBackError from ship_order", err)
	}
	if r := byID["order-001"].Receipt; r.Tracking != "TRK-order-001" || r.ChargeID != "ch_order-001" || r.Cents != 4900 {
		t.Errorf("order-001 receipt = %+v", r)
	}

	// The services, against expectations computed from the orders alone.
	inv, pay, ship := out.svc.inventory, out.svc.payments, out.svc.shipping
	missing := map[string]int{} // units per warehouse off the shelf for good
	for _, o := range makeOrders(20) {
		st := wantStatus[o.ID]
		charged, refunded := pay.Totals(o.ID)
		_, holds := inv.Holding(o.ID)
		switch st {
		case "": // completed
			missing[o.Warehouse] += o.Units
			if charged != o.Cents || refunded != 0 || !holds || !ship.Shipped(o.ID) {
				t.Errorf("%s completed: charged %d refunded %d holds %v shipped %v", o.ID, charged, refunded, holds, ship.Shipped(o.ID))
			}
		case flow.StatusFailed:
			if charged != refunded || holds || ship.Shipped(o.ID) {
				t.Errorf("%s rolled back: charged %d refunded %d holds %v shipped %v", o.ID, charged, refunded, holds, ship.Shipped(o.ID))
			}
		case flow.StatusSuspended:
			missing[o.Warehouse] += o.Units // its release keeps failing
			if charged != 0 || !holds || ship.Shipped(o.ID) {
				t.Errorf("%s suspended: charged %d holds %v shipped %v", o.ID, charged, holds, ship.Shipped(o.ID))
			}
		}
	}
	for _, s := range inv.Stock() {
		if want := stockPerSKU*len(skus) - missing[s.Warehouse]; s.Shelf != want {
			t.Errorf("%s: %d units on the shelf, want %d", s.Warehouse, s.Shelf, want)
		}
	}
	if c, r := pay.Totals("order-007"); c != pricesCents["desk"] || r != c { // one desk
		t.Errorf("order-007: charged %d, refunded %d, want both %d", c, r, pricesCents["desk"])
	}
	for _, id := range []string{"order-005", "order-012", "order-019"} { // trent: one timeout, one retry
		if n := pay.ChargeCalls(id); n != 2 {
			t.Errorf("%s: %d charge calls, want 2", id, n)
		}
	}
	for _, id := range []string{"order-010", "order-017"} { // declined: permanent, no retry
		if n := pay.ChargeCalls(id); n != 1 {
			t.Errorf("%s: %d charge calls, want 1", id, n)
		}
	}
	if n := inv.ReleaseCalls("order-003"); n != 3 {
		t.Errorf("order-003: %d release calls, want 3 (the retry policy's attempts)", n)
	}
	if n := ship.Count(); n != 15 {
		t.Errorf("%d shipments, want 15", n)
	}
	if problems := out.check(); len(problems) > 0 {
		t.Errorf("check: %q", problems)
	}

	// The report.
	text := stdout.String()
	for _, re := range []string{
		`database:  ` + regexp.QuoteMeta(path) + ` \(kept\)`,
		`(?m)^20 runs settled in \d+ms\.$`,
		`(?m)^  outcome +Engine\.CountRuns +Run\.Result$`,
		`(?m)^  completed +15 +15$`,
		`(?m)^  rolled back +4 +4$`,
		`(?m)^  suspended +1 +1$`,
		`(?m)^  order-003  compensation of step reserve_inventory failed after 3 attempt\(s\): release stock at oslo`,
		`(?m)^  order-010  step charge_payment failed after 1 attempt\(s\): card declined \(customer mallory\)$`,
		`(?m)^  oslo +400 +\d+ +3 +\d+ +\d+$`,
		`(?m)^  rolled back +4 +\$\d+\.\d\d +\$\d+\.\d\d +\$0\.00 +\$0\.00$`,
		`(?m)^Shipping: 15 parcels handed to the carrier\.$`,
		`(?m)^Consistency: OK`,
		`(?m)^Timeline of order-005, completed after a retried payment`,
		`(?m)^Timeline of order-007, rolled back: refunded, then released`,
		`(?m)^Timeline of order-003, suspended`,
		`(?m)^ +\+ms  event +step +try  detail$`,
		`(?m)^ +\d+  step_retried +charge_payment +1  payment gateway timeout; next attempt in \d+ms$`,
		`(?m)^ +\d+  compensation_completed +charge_payment +1$`,
		`(?m)^ +\d+  compensation_failed +reserve_inventory +3  release stock at oslo`,
		`(?m)^ +\d+  run_suspended +compensation of step reserve_inventory failed`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("output does not match %s", re)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("-db file: %v", err)
	}
}

// TestRunCounts checks the outcome counts for other order counts.
func TestRunCounts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		orders                           int
		completed, rolledBack, suspended int64
	}{
		{orders: 1, completed: 1},
		{orders: 3, completed: 2, suspended: 1},
		{orders: 7, completed: 5, rolledBack: 1, suspended: 1},
		{orders: 21, completed: 15, rolledBack: 4, suspended: 2}, // erin at oslo: refunded, release fails
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.orders), func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "orders.db")
			var stdout bytes.Buffer
			out, err := runSaga(testContext(t), []string{"-db", path, "-orders", strconv.Itoa(tt.orders)}, &stdout)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, stdout.String())
			}
			got := [3]int64{out.engine[flow.StatusCompleted], out.engine[flow.StatusFailed], out.engine[flow.StatusSuspended]}
			if want := [3]int64{tt.completed, tt.rolledBack, tt.suspended}; got != want {
				t.Errorf("completed, rolled back, suspended = %v, want %v\n%s", got, want, stdout.String())
			}
		})
	}
}

// TestRunTempDatabase checks the default database: a temporary file,
// printed, and removed at exit unless -keep.
func TestRunTempDatabase(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		args := []string{"-orders", "2"}
		if keep {
			args = append(args, "-keep")
		}
		var stdout bytes.Buffer
		if err := run(testContext(t), args, &stdout); err != nil {
			t.Fatalf("run %q: %v", args, err)
		}
		m := regexp.MustCompile(`(?m)^database:  (\S+) `).FindStringSubmatch(stdout.String())
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
	path := filepath.Join(t.TempDir(), "orders.db")
	args := []string{"-db", path, "-orders", "2"}
	if err := run(testContext(t), args, &bytes.Buffer{}); err != nil {
		t.Fatalf("first run: %v", err)
	}
	err := run(testContext(t), args, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "already holds a run order-001") {
		t.Fatalf("second run on the same database: err %v, want one saying it already holds the run", err)
	}
}

func TestRunBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-orders", "0"}, {"-orders", "x"}, {"-nope"}, {"extra"}} {
		if err := run(testContext(t), args, &bytes.Buffer{}); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
	if err := run(testContext(t), []string{"-h"}, &bytes.Buffer{}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("run -h: err %v, want flag.ErrHelp", err)
	}
}

package flow_test

import (
	"slices"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/clock"
)

// Each short-lived process leaves the report of a stopped engine; they are
// pruned StoppedReportRetention (24h by default) after their stop, by the
// next engine's Start (a short process never reaches its cleaner's first
// pass) and by Clean, so they do not pile up for ReportRetention (issue 22).
func TestStoppedReportsArePruned(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	clk := clock.NewManual(maintenanceEpoch)
	owners := func(e *flow.Engine) []string {
		t.Helper()
		reports, err := e.Reports(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range reports {
			out = append(out, r.Owner)
		}
		return out
	}
	shortRun := func(id string) *flow.Engine {
		t.Helper()
		cfg := maintenanceConfig(clk)
		cfg.WorkerID = id
		e := openEngine(t, path, cfg)
		flow.Register(e, doubler("short-"+id, 1))
		startEngine(t, e)
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		return e
	}
	shortRun("first")
	clk.Advance(23 * time.Hour)
	shortRun("second")
	// Within the retention: both stay.
	if got := owners(openEngine(t, path, maintenanceConfig(clk))); !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("after two short runs: engines %v, want [first second]", got)
	}
	clk.Advance(2 * time.Hour)
	// first stopped 25h ago: the third engine's Start deletes its report.
	third := shortRun("third")
	if got := owners(third); !slices.Equal(got, []string{"second", "third"}) {
		t.Errorf("after a start 25h on: engines %v, want [second third]", got)
	}
	clk.Advance(24*time.Hour + time.Minute)
	// Clean deletes by the retention of its engine; a retention of 25h keeps the one stopped 24h ago.
	cfg := maintenanceConfig(clk)
	cfg.StoppedReportRetention = 25 * time.Hour
	keeper := openEngine(t, path, cfg)
	if _, err := keeper.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	if got := owners(keeper); !slices.Equal(got, []string{"third"}) {
		t.Errorf("after Clean with 25h: engines %v, want [third]", got)
	}
	if _, err := openEngine(t, path, maintenanceConfig(clk)).Clean(ctx); err != nil {
		t.Fatal(err)
	}
	if got := owners(keeper); len(got) != 0 {
		t.Errorf("after Clean with the default: engines %v, want none", got)
	}
}

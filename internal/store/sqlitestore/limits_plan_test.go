package sqlitestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// TestLimitQueryPlans checks that the claims of a limited queue use the
// indexes written for them, on an empty database and on one with a
// backlog of keyed runs and statistics: RunClaimKey and RunReadyKeys go
// along runs_ready_key, the claim of the runs without a key along
// runs_ready, with no scan of the runs and no sort.
func TestLimitQueryPlans(t *testing.T) {
	t.Parallel()
	s := openStore(t, filepath.Join(t.TempDir(), "plans.db"), sqlitestore.Options{})
	writer, _ := sqlitestore.Pools(s)
	noScan := []string{"SCAN r", "SCAN flowlite_runs", "TEMP B-TREE", "flowlite_runs_status"}
	tests := []struct {
		name string
		want []string // substrings of the plan
		not  []string
	}{
		{"RunClaimKey", []string{
			"SEARCH flowlite_runs USING INDEX sqlite_autoindex_flowlite_runs_1 (id=?)",
			"SEARCH r USING INDEX flowlite_runs_ready_key (queue=? AND concurrency_key=?)",
			"SEARCH q USING INDEX sqlite_autoindex_flowlite_queues_1 (name=?)",
		}, noScan},
		{"RunClaimUnkeyed", []string{
			"SEARCH flowlite_runs USING INDEX sqlite_autoindex_flowlite_runs_1 (id=?)",
			"SEARCH r USING INDEX flowlite_runs_ready (queue=?)",
		}, noScan},
		// A seek for a key's first run, one for the next priority of a
		// key whose first run sleeps, one for the next key: never along
		// every entry of the queue, or of a key's priority.
		{"RunReadyKeys", []string{
			"SEARCH r USING INDEX flowlite_runs_ready_key (queue=? AND concurrency_key>?)",
			"SEARCH x USING INDEX flowlite_runs_ready_key (queue=? AND concurrency_key=? AND priority<?)",
			"SEARCH x USING INDEX flowlite_runs_ready_key (queue=? AND concurrency_key>?)",
		}, append([]string{"(queue=?)\n", "(queue=? AND concurrency_key=?)\n"}, noScan...)},
		{"RunLeasedCounts", []string{"flowlite_runs USING INDEX flowlite_runs_leased"}, []string{"SCAN flowlite_runs\n", "flowlite_runs_ready"}},
		{"RateStartsCount", []string{"SEARCH flowlite_rate_starts USING COVERING INDEX flowlite_rate_starts_at (queue=? AND concurrency_key=? AND at>?)"}, nil},
		{"RateStartsPrune", []string{"SEARCH flowlite_rate_starts USING INDEX flowlite_rate_starts_at (queue=?)"}, nil},
	}
	check := func(when string) {
		for _, tt := range tests {
			plan := queryPlan(t, writer, "limits.sql", tt.name) + "\n"
			for _, w := range tt.want {
				if !strings.Contains(plan, w) {
					t.Errorf("%s: plan of %s lacks %q:\n%s", when, tt.name, w, plan)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(plan, n) {
					t.Errorf("%s: plan of %s has %q:\n%s", when, tt.name, n, plan)
				}
			}
		}
	}
	check("empty database")

	// A backlog: ready runs of one key, sleeping runs of others, a few
	// without a key, finished ones, then statistics.
	err := s.Write(t.Context(), func(tx store.Tx) error {
		ctx := t.Context()
		for i := range 3000 {
			p := store.RunInsertParams{
				ID: fmt.Sprintf("r%05d", i), Workflow: flowtype.WorkflowKey{Name: "job", Version: 1},
				Queue: "q", Input: []byte(`{}`), RunAt: base, Now: base,
			}
			switch {
			case i < 1000:
				p.ConcurrencyKey = "hot"
			case i < 2000:
				p.ConcurrencyKey, p.RunAt = fmt.Sprint("sleeper", i%100), base+3_600_000
			case i < 2100:
			default:
				p.ConcurrencyKey = "done"
			}
			if _, err := tx.RunInsert(ctx, p); err != nil {
				return err
			}
			if p.ConcurrencyKey == "done" {
				err := tx.RunSetStatus(ctx, store.RunSetStatusParams{ID: p.ID, Expected: flowtype.StatusPending, Status: flowtype.StatusCompleted, FinishedAt: base, Now: base})
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.ExecContext(context.Background(), "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	check("after ANALYZE")
}

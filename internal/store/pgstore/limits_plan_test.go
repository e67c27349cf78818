package pgstore_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// TestLimitQueriesReadOnlyWhatTheyReturn checks the plans of the claims of
// a limited queue on a backlog, with the table never analyzed and with the
// prepared statement's generic plan: 10,000 ready runs of one key, 5,000
// sleeping runs of another and 5,000 sleeping runs of 5,000 more keys, a
// few ready runs without a key and a few leased runs. RunClaimKey and
// RunReadyKeys go along runs_ready_key or runs_ready (no sequential scan
// of runs) and read about what they return, not the backlog; RunReadyKeys
// reads no more than one sleeping run per priority of a key;
// RunLeasedCounts reads the leased runs, not the backlog.
func TestLimitQueriesReadOnlyWhatTheyReturn(t *testing.T) {
	t.Parallel()
	claimRec := &statementRecorder{prefix: "-- name: RunClaimKey "}
	keysRec := &statementRecorder{prefix: "-- name: RunReadyKeys "}
	countRec := &statementRecorder{prefix: "-- name: RunLeasedCounts "}
	db, s, schema := openTraced(t, tracers{claimRec, keysRec, countRec})
	ctx := t.Context()

	const hot, sleepy, sleepers, unkeyed, leased = 10_000, 5_000, 5_000, 20, 8
	wf := flowtype.WorkflowKey{Name: "job", Version: 1}
	var ps []store.RunInsertParams
	add := func(id string, runAt int64) {
		ps = append(ps, store.RunInsertParams{ID: id, Workflow: wf, Queue: "q", Input: []byte("{}"), RunAt: runAt, Now: base})
	}
	for i := range hot {
		add(fmt.Sprintf("hot%05d", i), base)
	}
	for i := range sleepy {
		add(fmt.Sprintf("sleepy%05d", i), base+3_600_000)
	}
	for i := range sleepers {
		add(fmt.Sprintf("sleeper%05d", i), base+3_600_000)
	}
	for i := range unkeyed {
		add(fmt.Sprintf("plain%05d", i), base)
	}
	for i := range leased {
		add(fmt.Sprintf("busy%05d", i), base)
	}
	if err := s.Write(ctx, func(tx store.Tx) error {
		_, err := tx.RunInsertMany(ctx, ps)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// The keys, set directly: RunInsertMany sets a run's options one
	// statement each.
	for _, stmt := range []string{
		`UPDATE %s.runs SET concurrency_key = 'hot' WHERE id LIKE 'hot%%'`,
		`UPDATE %s.runs SET concurrency_key = 'sleepy' WHERE id LIKE 'sleepy%%'`,
		`UPDATE %s.runs SET concurrency_key = 'sleeper-' || id WHERE id LIKE 'sleeper%%'`,
		`UPDATE %s.runs SET concurrency_key = 'busy' WHERE id LIKE 'busy%%'`,
	} {
		if _, err := db.ExecContext(ctx, fmt.Sprintf(stmt, schema)); err != nil {
			t.Fatal(err)
		}
	}
	var claimed, busy []store.Run
	var keys []string
	var counts map[string]int
	if err := s.Write(ctx, func(tx store.Tx) error {
		var err error
		if busy, err = tx.RunClaimKey(ctx, store.RunClaimKeyParams{Key: "busy", RunClaimParams: store.RunClaimParams{
			Queue: "q", Known: []flowtype.WorkflowKey{wf}, Owner: "w", Max: leased, Now: base + 1, LeaseExpiresAt: base + 60_000,
		}}); err != nil {
			return err
		}
		if claimed, err = tx.RunClaimKey(ctx, store.RunClaimKeyParams{Key: "hot", RunClaimParams: store.RunClaimParams{
			Queue: "q", Known: []flowtype.WorkflowKey{wf}, Owner: "w", Max: 4, Now: base + 1, LeaseExpiresAt: base + 60_000,
		}}); err != nil {
			return err
		}
		if keys, err = tx.RunReadyKeys(ctx, store.RunReadyKeysParams{Queue: "q", Now: base + 1, Max: 10, Scan: 50}); err != nil {
			return err
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if counts, err := s.Reader().RunLeasedCounts(ctx, "q"); err != nil || counts["busy"] != leased || counts["hot"] != 4 {
		t.Fatalf("leased counts: %v, %v", counts, err)
	}
	_ = counts
	if len(busy) != leased || len(claimed) != 4 || claimed[0].ID != "hot00000" {
		t.Fatalf("claimed %v and %v; want %d busy and 4 from hot00000", runIDs(busy), runIDs(claimed), leased)
	}
	if !slices.Equal(keys, []string{"hot"}) {
		t.Fatalf("ready keys: %v, want hot", keys)
	}

	for _, c := range []struct {
		name    string
		rec     *statementRecorder
		index   []string // the indexes of runs it may read
		maxRead float64
		analyze bool // planned on an analyzed table
	}{
		// 4 more runs of hot: the 4 claimed above are skipped (dead index
		// entries), 4 read and locked, 4 updated through the primary key.
		{"RunClaimKey", claimRec, []string{"runs_ready_key", "runs_pkey"}, 16, false},
		// 50 keys looked at (one seek each: hot, sleepy, 48 sleepers; busy
		// is leased), each with its EXISTS: one run of hot, at most one
		// sleeping run of each other key.
		{"RunReadyKeys", keysRec, []string{"runs_ready_key"}, 2*50 + 10, false},
		// The leased runs, not the backlog, once the table is analyzed:
		// never analyzed, the planner takes most runs for leased (IS NOT
		// NULL of a column without statistics) and scans the table.
		{"RunLeasedCounts", countRec, []string{"runs_leased"}, 2 * (leased + 4), true},
	} {
		query, args := c.rec.last(t)
		if c.analyze {
			if _, err := db.ExecContext(ctx, "ANALYZE "+schema+".runs"); err != nil {
				t.Fatal(err)
			}
		}
		for _, mode := range []string{"custom", "generic"} {
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				plan := explainAnalyze(t, db, schema, mode, query, args)
				read := plan.tableRowsRead("runs")
				if read > c.maxRead {
					t.Errorf("%s read %.0f rows of runs, want at most %.0f", c.name, read, c.maxRead)
				}
				plan.walk(func(n planNode) {
					// A node that never ran (the other branch of RunClaimKey)
					// reads nothing.
					if n.Relation != "runs" || n.NodeType == "ModifyTable" || n.ActualLoops == 0 {
						return
					}
					if n.NodeType == "Seq Scan" {
						t.Errorf("%s scans runs sequentially", c.name)
					} else if !slices.Contains(c.index, n.Index) {
						t.Errorf("%s reads runs through %s (%s), want one of %v", c.name, n.Index, n.NodeType, c.index)
					}
				})
				if t.Failed() || testing.Verbose() {
					t.Logf("plan:\n%s", plan.outline(""))
				}
			})
		}
	}
}

// outline is the plan's nodes, one a line, indented by depth.
func (n planNode) outline(indent string) string {
	out := fmt.Sprintf("%s%s %s %s (%s) rows=%.0f loops=%.0f removed=%.0f\n", indent, n.NodeType, n.Relation, n.Index, n.Parent, n.ActualRows, n.ActualLoops, n.RemovedFilter)
	for _, c := range n.Plans {
		out += c.outline(indent + "  ")
	}
	return out
}

func runIDs(runs []store.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

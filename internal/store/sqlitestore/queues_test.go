package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

var (
	queryName = regexp.MustCompile(`(?m)^-- name: (\w+) :\w+\n`)
	queryArg  = regexp.MustCompile(`@(\w+)`)
)

// query returns the text of the named query of a file of db/queries/sqlite
// and one argument (NULL) per distinct @parameter, which SQLite takes as
// they are.
func query(t *testing.T, file, name string) (string, []any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "db", "queries", "sqlite", file))
	if err != nil {
		t.Fatal(err)
	}
	bodies := queryName.Split(string(b), -1)[1:]
	for i, m := range queryName.FindAllStringSubmatch(string(b), -1) {
		if m[1] != name {
			continue
		}
		var args []any
		seen := make(map[string]bool)
		for _, a := range queryArg.FindAllStringSubmatch(bodies[i], -1) {
			if !seen[a[1]] {
				seen[a[1]] = true
				args = append(args, sql.Named(a[1], nil))
			}
		}
		return bodies[i], args
	}
	t.Fatalf("no query %s in %s", name, file)
	return "", nil
}

func queryPlan(t *testing.T, db *sql.DB, file, name string) string {
	t.Helper()
	text, args := query(t, file, name)
	rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+text, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", name, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestQueryPlans checks that the claim and the job-queue queries use the
// indexes written for them, on an empty database and on one with data and
// statistics (as after ANALYZE or PRAGMA optimize): a pause check or a
// unique key must not cost the claim its partial index.
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	s := openStore(t, filepath.Join(t.TempDir(), "plans.db"), sqlitestore.Options{})
	writer, _ := sqlitestore.Pools(s)
	tests := []struct {
		file, name string
		want       []string // substrings of the plan
		not        []string
	}{
		{"runs.sql", "RunClaim", []string{
			"SEARCH flowlite_runs USING INDEX sqlite_autoindex_flowlite_runs_1 (id=?)",       // the outer update, by primary key
			"SEARCH r USING INDEX flowlite_runs_ready (queue=? AND priority=? AND run_at<?)", // due runs only
			"SEARCH q USING INDEX sqlite_autoindex_flowlite_queues_1 (name=?)",               // the pause check
		}, []string{"SCAN r", "SCAN flowlite_runs", "flowlite_runs_status", "TEMP B-TREE"}}, // reads only the runs it claims
		{"runs.sql", "RunReadyNextPriority", []string{"SEARCH r USING INDEX flowlite_runs_ready (queue=? AND priority<?)"},
			[]string{"SCAN r", "TEMP B-TREE"}},
		{"runs.sql", "RunInsert", []string{"SEARCH h USING INDEX sqlite_autoindex_flowlite_unique_holds_1 (workflow=? AND key=?)"}, nil},
		{"queues.sql", "RunGetKeyHolder", []string{"flowlite_runs_unique (workflow=? AND unique_key=?)"}, nil},
		{"queues.sql", "UniqueHoldDrop", []string{"sqlite_autoindex_flowlite_unique_holds_1 (workflow=? AND key=?)"}, nil},
		{"runs.sql", "RunDeleteOne", []string{"SEARCH flowlite_runs USING INDEX sqlite_autoindex_flowlite_runs_1 (id=?)"}, []string{"SCAN flowlite_runs"}},
		{"runs.sql", "RunMakeDue", []string{"SEARCH flowlite_runs USING INDEX sqlite_autoindex_flowlite_runs_1 (id=?)"}, nil},
		{"queues.sql", "UniqueHoldGet", []string{"sqlite_autoindex_flowlite_unique_holds_1 (workflow=? AND key=?)"}, nil},
		{"queues.sql", "RunDeadList", []string{"flowlite_runs_dead (status=? AND finished_at>? AND finished_at<?)"}, []string{"TEMP B-TREE"}},
		{"queues.sql", "RunDeadBatch", []string{"flowlite_runs_dead (status=? AND finished_at>? AND finished_at<?)"}, []string{"TEMP B-TREE"}},
		{"queues.sql", "RunDeadDelete", []string{"SEARCH flowlite_runs USING INDEX sqlite_autoindex_flowlite_runs_1 (id=?)", "flowlite_runs_dead (status=? AND finished_at>? AND finished_at<?)"}, []string{"TEMP B-TREE"}},
		{"queues.sql", "RunRequeueInsert", []string{"SEARCH f USING INDEX sqlite_autoindex_flowlite_runs_1 (id=?)"}, nil},
		{"queues.sql", "QueueDurations", []string{"flowlite_runs_finished (status=? AND finished_at>?)"}, nil},
	}
	check := func(when string) {
		for _, tt := range tests {
			plan := queryPlan(t, writer, tt.file, tt.name)
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

	// Mostly finished runs, a few ready ones, some dead letters, a paused
	// queue and unique keys, then statistics.
	err := s.Write(t.Context(), func(tx store.Tx) error {
		ctx := t.Context()
		for i := range 3000 {
			p := store.RunInsertParams{
				ID: fmt.Sprintf("r%05d", i), Workflow: flowtype.WorkflowKey{Name: "job", Version: 1},
				Queue: fmt.Sprintf("q%d", i%3), Input: []byte(`{}`), RunAt: base, Now: base,
			}
			if i%10 == 0 {
				p.UniqueKey = fmt.Sprint("k", i)
			}
			if _, err := tx.RunInsert(ctx, p); err != nil {
				return err
			}
			status := flowtype.StatusCompleted
			switch {
			case i%100 == 0:
				continue // stays pending
			case i%50 == 0:
				status = flowtype.StatusFailed
			}
			err := tx.RunSetStatus(ctx, store.RunSetStatusParams{ID: p.ID, Expected: flowtype.StatusPending, Status: status, FinishedAt: base + int64(i), Now: base})
			if err != nil {
				return err
			}
		}
		_, err := tx.QueueSetPaused(ctx, "q1", true, base)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.ExecContext(context.Background(), "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	check("after ANALYZE")
}

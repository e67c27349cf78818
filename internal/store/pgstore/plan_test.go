package pgstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// statementRecorder keeps the text and arguments of the last statement a
// pool ran whose text starts with prefix (a sqlc "-- name:" line).
type statementRecorder struct {
	prefix string
	mu     sync.Mutex
	sql    string
	args   []any
}

func (r *statementRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, r.prefix) {
		var args []any
		for _, a := range d.Args {
			switch a.(type) {
			case pgx.QueryResultFormatsByOID, pgx.QueryResultFormats, pgx.QueryExecMode:
				// options pgx's database/sql driver passes along, not arguments
			default:
				args = append(args, a)
			}
		}
		r.mu.Lock()
		r.sql, r.args = d.SQL, args
		r.mu.Unlock()
	}
	return ctx
}

// last returns the text and arguments of the statement recorded last,
// and fails the test if none was.
func (r *statementRecorder) last(t *testing.T) (string, []any) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sql == "" {
		t.Fatalf("no statement %q… was run", r.prefix)
	}
	return r.sql, r.args
}

func (r *statementRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// planNode is the part of EXPLAIN (ANALYZE, FORMAT JSON) the test reads.
type planNode struct {
	NodeType      string     `json:"Node Type"`
	Relation      string     `json:"Relation Name"`
	Index         string     `json:"Index Name"`
	ActualRows    float64    `json:"Actual Rows"`
	ActualLoops   float64    `json:"Actual Loops"`
	RemovedFilter float64    `json:"Rows Removed by Filter"`
	RemovedJoin   float64    `json:"Rows Removed by Join Filter"`
	Parent        string     `json:"Parent Relationship"` // Outer, Inner, InitPlan, SubPlan…
	Plans         []planNode `json:"Plans"`
}

// runsRowsRead is how many rows of the runs table the plan's nodes
// produced or filtered out, over all their loops, and the node types met.
func (n planNode) runsRowsRead(types map[string]bool) float64 {
	types[n.NodeType] = true
	var read float64
	if n.Relation == "runs" {
		read = n.ActualRows*n.ActualLoops + n.RemovedFilter*n.ActualLoops
	}
	read += n.RemovedJoin * n.ActualLoops
	for _, c := range n.Plans {
		read += c.runsRowsRead(types)
	}
	return read
}

// walk calls f for n and every node below it.
func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// sortsTable reports whether n is a Sort of rows read from the table
// relation: its input, not counting the statement's CTEs and subqueries
// that EXPLAIN shows below it, reads the table.
func (n planNode) sortsTable(relation string) bool {
	if n.NodeType != "Sort" {
		return false
	}
	var reads func(planNode) bool
	reads = func(m planNode) bool {
		if m.Relation == relation {
			return true
		}
		for _, c := range m.Plans {
			if c.Parent != "InitPlan" && c.Parent != "SubPlan" && reads(c) {
				return true
			}
		}
		return false
	}
	return reads(n)
}

// tableRowsRead is how many rows of the table relation the plan's nodes
// produced or filtered out, over all their loops.
func (n planNode) tableRowsRead(relation string) float64 {
	var read float64
	n.walk(func(m planNode) {
		if m.Relation == relation {
			read += (m.ActualRows + m.RemovedFilter) * m.ActualLoops
		}
	})
	return read
}

// TestClaimReadsOnlyWhatItClaims checks that the claim statement's plan
// reads about as many runs as it claims however many are ready, with the
// table never analyzed (as right after a bulk insert) and with the
// generic plan of the prepared statement: earlier, the planner sorted
// every ready run and then compared each with every picked ID, so that a
// drain got slower the larger its backlog.
func TestClaimReadsOnlyWhatItClaims(t *testing.T) {
	t.Parallel()
	rec := &statementRecorder{prefix: "-- name: RunClaim "}
	db, s, schema := openTraced(t, rec)
	ctx := t.Context()

	const ready, claim = 3000, 4
	wf := flowtype.WorkflowKey{Name: "job", Version: 1}
	ps := make([]store.RunInsertParams, ready)
	for i := range ps {
		ps[i] = store.RunInsertParams{ID: fmt.Sprintf("run%05d", i), Workflow: wf, Queue: "q", Input: []byte("{}"), RunAt: base, Now: base}
	}
	if err := s.Write(ctx, func(tx store.Tx) error {
		_, err := tx.RunInsertMany(ctx, ps)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var claimed []store.Run
	if err := s.Write(ctx, func(tx store.Tx) error {
		var err error
		claimed, err = tx.RunClaim(ctx, store.RunClaimParams{
			Queue: "q", Known: []flowtype.WorkflowKey{wf}, Owner: "w", Max: claim, Now: base + 1, LeaseExpiresAt: base + 60_000,
		})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(claimed) != claim || claimed[0].ID != "run00000" {
		t.Fatalf("claimed %d runs, first %v; want %d from run00000", len(claimed), claimed, claim)
	}
	query, args := rec.last(t)

	for _, mode := range []string{"custom", "generic"} {
		t.Run(mode, func(t *testing.T) {
			plan := explainAnalyze(t, db, schema, mode, query, args)
			types := map[string]bool{}
			read := plan.runsRowsRead(types)
			// A claim of 4 more runs: the 4 claimed above are skipped
			// (their index entries are dead), 4 are read and locked, 4 are
			// updated through the primary key.
			if read > 4*claim {
				t.Errorf("the claim read %.0f rows of runs to claim %d of %d ready ones", read, claim, ready-claim)
			}
			for _, bad := range []string{"Sort", "Seq Scan", "Hash Join"} {
				if types[bad] {
					t.Errorf("the claim's plan has a %s node", bad)
				}
			}
			if t.Failed() {
				b, _ := json.MarshalIndent(plan, "", "  ")
				t.Logf("plan:\n%s", b)
			}
		})
	}
}

// openTraced opens a store in a fresh schema on a pool whose statements
// tracer sees, and returns the pool, the store and the schema.
func openTraced(t *testing.T, tracer pgx.QueryTracer) (*sql.DB, *pgstore.Store, string) {
	t.Helper()
	cfg := mustParse(t, needPG(t))
	cfg.Tracer = tracer
	db := stdlib.OpenDB(cfg)
	t.Cleanup(func() { db.Close() })
	schema := freshSchema()
	s, err := pgstore.OpenDB(t.Context(), db, pgstore.Options{Schema: schema, NoWakes: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return db, s, schema
}

// explainAnalyze runs EXPLAIN ANALYZE of query with args in a transaction
// it rolls back, planned with the arguments' values (custom) or as a
// prepared statement's generic plan.
func explainAnalyze(t *testing.T, db *sql.DB, schema, mode, query string, args []any) planNode {
	t.Helper()
	ctx := t.Context()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var out []byte
	switch mode {
	case "custom":
		err = tx.QueryRowContext(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+query, args...).Scan(&out)
	case "generic":
		if _, err := tx.ExecContext(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "PREPARE claim_plan_test AS "+query); err != nil {
			t.Fatal(err)
		}
		// A prepared statement outlives the transaction: drop it with it.
		defer func() { _, _ = tx.ExecContext(ctx, "DEALLOCATE claim_plan_test") }()
		lits := make([]string, len(args))
		for i, a := range args {
			switch v := a.(type) {
			case string:
				lits[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
			case []byte:
				lits[i] = "'" + strings.ReplaceAll(string(v), "'", "''") + "'"
			case json.RawMessage:
				lits[i] = "'" + strings.ReplaceAll(string(v), "'", "''") + "'"
			case int64:
				lits[i] = fmt.Sprint(v)
			default:
				t.Fatalf("argument %d: unexpected %T", i+1, a)
			}
		}
		err = tx.QueryRowContext(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE claim_plan_test("+strings.Join(lits, ", ")+")").Scan(&out)
	}
	if err != nil {
		t.Fatalf("explain the claim in schema %s: %v", schema, err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("read the plan %s: %v", out, err)
	}
	return plans[0].Plan
}

// statementCounter counts the statements a pool ran, by their sqlc name.
type statementCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if name, ok := strings.CutPrefix(d.SQL, "-- name: "); ok {
		name, _, _ = strings.Cut(name, " ")
		c.mu.Lock()
		c.n[name]++
		c.mu.Unlock()
	}
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *statementCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// TestEventsOfATransactionInOneInsert checks that the events a
// transaction appends are inserted by one statement, in the order they
// were appended, that reads in the transaction see them, and that an event
// of a run that does not exist fails the write and rolls it back.
func TestEventsOfATransactionInOneInsert(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, needPG(t))
	counter := &statementCounter{n: map[string]int{}}
	cfg.Tracer = counter
	db := stdlib.OpenDB(cfg)
	t.Cleanup(func() { db.Close() })
	ctx := t.Context()
	s, err := pgstore.OpenDB(ctx, db, pgstore.Options{Schema: freshSchema(), NoWakes: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	wf := flowtype.WorkflowKey{Name: "job", Version: 1}
	insert := func(id string) {
		t.Helper()
		if err := s.Write(ctx, func(tx store.Tx) error {
			_, err := tx.RunInsert(ctx, store.RunInsertParams{ID: id, Workflow: wf, Queue: "q", Input: []byte("{}"), RunAt: base, Now: base})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	insert("a")
	insert("b")
	counter.take()

	kinds := []string{"one", "two", "three"}
	var seen []store.Event
	err = s.Write(ctx, func(tx store.Tx) error {
		for _, k := range kinds {
			if err := tx.EventAppend(ctx, store.Event{RunID: "a", At: base, Kind: k}); err != nil {
				return err
			}
			if err := tx.EventAppend(ctx, store.Event{RunID: "b", At: base, Kind: k}); err != nil {
				return err
			}
		}
		if _, err := tx.RunWake(ctx, "a", base); err != nil { // a statement not reading events
			return err
		}
		var err error
		seen, err = tx.EventList(ctx, "a")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	n := counter.take()
	if n["EventAppendMany"] != 1 || n["EventAppend"] != 0 {
		t.Errorf("statements appending 6 events: %v; want one EventAppendMany", n)
	}
	if got := eventKinds(seen); !slices.Equal(got, kinds) {
		t.Errorf("events of a read in the transaction: %v, want %v", got, kinds)
	}
	for _, id := range []string{"a", "b"} {
		events, err := s.Reader().EventList(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got := eventKinds(events); !slices.Equal(got, kinds) {
			t.Errorf("events of run %s: %v, want %v", id, got, kinds)
		}
	}

	err = s.Write(ctx, func(tx store.Tx) error {
		if err := tx.EventAppend(ctx, store.Event{RunID: "a", At: base, Kind: "four"}); err != nil {
			return err
		}
		return tx.EventAppend(ctx, store.Event{RunID: "missing", At: base, Kind: "four"})
	})
	if err == nil {
		t.Fatal("a write appending an event to a run that does not exist succeeded")
	}
	events, err := s.Reader().EventList(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got := eventKinds(events); !slices.Equal(got, kinds) {
		t.Errorf("events of run a after a failed write: %v, want %v", got, kinds)
	}
}

func eventKinds(events []store.Event) []string {
	kinds := make([]string, len(events))
	for i, e := range events {
		kinds[i] = e.Kind
	}
	return kinds
}

// tracers runs several tracers on one pool.
type tracers []pgx.QueryTracer

func (ts tracers) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	for _, t := range ts {
		ctx = t.TraceQueryStart(ctx, c, d)
	}
	return ctx
}

func (ts tracers) TraceQueryEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryEndData) {
	for _, t := range ts {
		t.TraceQueryEnd(ctx, c, d)
	}
}

// TestFinishManyReadsOnlyItsSteps checks that RunFinishMany's plan finds
// the steps it completes through the primary key, on a steps table never
// analyzed (as after a burst of work): the planner, believing the table
// small, joined the batch with a sequential scan of every step, 2 ms a
// batch on 20,000 steps and growing with the table. The adapter turns
// sequential scans off for the statement's transaction first
// (SeqScanOffForTx); the test replays both statements as it ran them.
func TestFinishManyReadsOnlyItsSteps(t *testing.T) {
	t.Parallel()
	off := &statementRecorder{prefix: "-- name: SeqScanOffForTx "}
	finish := &statementRecorder{prefix: "-- name: RunFinishMany "}
	db, s, schema := openTraced(t, tracers{off, finish})
	ctx := t.Context()

	const runs, finished = 3000, 4
	wf := flowtype.WorkflowKey{Name: "job", Version: 1}
	ps := make([]store.RunInsertParams, runs)
	steps := make([]store.StepBeginParams, runs)
	for i := range ps {
		id := fmt.Sprintf("run%05d", i)
		ps[i] = store.RunInsertParams{ID: id, Workflow: wf, Queue: "q", Input: []byte("{}"), RunAt: base, Now: base}
		steps[i] = store.StepBeginParams{Key: store.StepKey{RunID: id, Name: "work"}, Input: []byte("{}"), Now: base, New: true}
	}
	var claimed []store.Run
	if err := s.Write(ctx, func(tx store.Tx) error {
		if _, err := tx.RunInsertMany(ctx, ps); err != nil {
			return err
		}
		if _, err := tx.StepBeginMany(ctx, steps); err != nil {
			return err
		}
		var err error
		claimed, err = tx.RunClaim(ctx, store.RunClaimParams{
			Queue: "q", Known: []flowtype.WorkflowKey{wf}, Owner: "w", Max: finished, Now: base + 1, LeaseExpiresAt: base + 60_000,
		})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	items := make([]store.RunFinishItem, len(claimed))
	for i, r := range claimed {
		items[i] = store.RunFinishItem{Lease: r.Lease(),
			Finish: store.RunFinishParams{Status: flowtype.StatusCompleted, Output: []byte("{}"), FinishedAt: base + 2, Now: base + 2},
			Step:   &store.StepCompleteParams{Key: store.StepKey{RunID: r.ID, Name: "work"}, Output: []byte("{}"), Now: base + 2}}
	}
	// Explained, not run: the statement replayed below must find the runs
	// still leased and their steps still running.
	if err := s.Write(ctx, func(tx store.Tx) error {
		if _, err := tx.RunFinishMany(ctx, items); err != nil {
			return err
		}
		return errRollBack
	}); !errors.Is(err, errRollBack) {
		t.Fatalf("finish: %v", err)
	}
	for _, r := range []*statementRecorder{off, finish} {
		r.mu.Lock()
		seen := r.sql != ""
		r.mu.Unlock()
		if !seen {
			t.Fatalf("the statement %q was not seen", r.prefix)
		}
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, off.sql, off.args...); err != nil {
		t.Fatal(err)
	}
	var out []byte
	if err := tx.QueryRowContext(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+finish.sql, finish.args...).Scan(&out); err != nil {
		t.Fatalf("explain RunFinishMany in schema %s: %v", schema, err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("read the plan %s: %v", out, err)
	}
	var seqScans []string
	var walk func(n planNode)
	walk = func(n planNode) {
		if n.NodeType == "Seq Scan" && (n.Relation == "steps" || n.Relation == "runs") {
			seqScans = append(seqScans, n.Relation)
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plans[0].Plan)
	if len(seqScans) > 0 {
		b, _ := json.MarshalIndent(plans[0].Plan, "", "  ")
		t.Errorf("RunFinishMany of %d runs scans all of %v among %d runs:\n%s", finished, seqScans, runs, b)
	}
}

var errRollBack = errors.New("roll back")

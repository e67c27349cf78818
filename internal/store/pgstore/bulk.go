package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/flowlite/flowlite/internal/store"
)

// Bulk inserts by COPY. A batch of runs (RunInsertMany) and of events
// (EventAppendMany) is one INSERT … SELECT over a JSON document otherwise,
// and the server spends most of that statement taking the document apart:
// parsing it into jsonb, then looking up every field of every element. COPY
// sends the rows in pgx's binary format, which the server stores as they
// come: 12.5 ms of the server's time per 1,000 runs where the statement
// took 22 (BenchmarkEnqueueManyPG, statement durations in the server's
// log). It is the one
// write here that is not a statement of db/queries: pgx builds the COPY
// from the table and column names below, which name the same columns
// RunInsertMany and EventAppendMany fill.
//
// COPY has no ON CONFLICT and no WHERE, so it serves only the batches whose
// rows need neither:
//   - runs without a unique key (a key needs its holds tested, and a held
//     one skips the run); a taken ID makes the COPY fail, which rolls back
//     to a savepoint taken before it, and the batch goes through the
//     statement, which reports the ID taken, as if COPY had not been tried;
//   - events of runs the transaction inserted by COPY (the run_started
//     events of a batch). Events have no foreign key (migration 00010),
//     and COPY cannot test that their runs exist, as the statements do;
//     these runs do. And the transaction, having written, holds a
//     transaction ID before its first event draws an ID from the sequence
//     (EventAppend explains why the change feed needs that order; COPY
//     draws a row's ID before it stores the row, which would give the
//     transaction its ID only then).
//
// And only in Write, whose transaction runs on a connection of the store's
// own (sql.Conn.Raw reaches pgx under it); a transaction the caller passed
// to WriteInTx keeps the statements.

// copyMinRows is the smallest batch sent by COPY: below it, the savepoint's
// two round trips cost more than the statement's parsing saves.
const copyMinRows = 64

// runCopyColumns are the columns a COPY of runs fills, in copyRunRow's
// order; the others take their defaults, as in RunInsertMany.
var runCopyColumns = []string{
	"id", "workflow", "version", "queue", "priority", "status", "input", "run_at", "deadline", "parent_id",
	"unique_states", "created_at", "updated_at", "timeout", "detached", "context_values", "concurrency_key",
}

// eventCopyColumns are the columns a COPY of events fills; id comes from
// the identity sequence, in row order.
var eventCopyColumns = []string{"run_id", "at", "kind", "step", "occurrence", "attempt", "detail"}

// errNoCopy says a COPY was not possible on this connection (not pgx's
// stdlib driver): the caller takes the statement instead.
var errNoCopy = errors.New("COPY not available on this connection")

// copyRunRow is p as a row of runCopyColumns.
func copyRunRow(p store.RunInsertParams, states int64) []any {
	var deadline, timeout *int64
	if p.Deadline != 0 {
		deadline = &p.Deadline
	}
	if p.Timeout != 0 {
		timeout = &p.Timeout
	}
	var parent *string
	if p.ParentID != "" {
		parent = &p.ParentID
	}
	input := p.Input
	if input == nil {
		input = []byte{} // input is NOT NULL; RunInsertMany stores an empty one as ''
	}
	return []any{
		p.ID, p.Workflow.Name, int64(p.Workflow.Version), p.Queue, int64(p.Priority), "pending", input, p.RunAt, deadline, parent,
		states, p.Now, p.Now, timeout, p.Detached, p.Context, p.ConcurrencyKey,
	}
}

// copyRuns inserts the runs of rows (copyRunRow's) by COPY inside a
// savepoint. It reports false, having inserted nothing and left the
// transaction as it was, when the COPY could not be made or met a taken
// ID; any other error fails the transaction.
func (t *tx) copyRuns(ctx context.Context, rows [][]any) (bool, error) {
	if t.conn == nil || len(rows) < copyMinRows {
		return false, nil
	}
	if err := t.q.RunBulkSavepoint(ctx); err != nil {
		return false, fmt.Errorf("COPY: %w", interpretError(ctx, err))
	}
	err := t.copyFrom(ctx, "runs", runCopyColumns, rows)
	if err == nil {
		if err := t.q.RunBulkRelease(ctx); err != nil {
			return false, fmt.Errorf("COPY: %w", interpretError(ctx, err))
		}
		if t.copied == nil {
			t.copied = make(map[string]bool, len(rows))
		}
		for _, r := range rows {
			t.copied[r[0].(string)] = true
		}
		return true, nil
	}
	var pgErr *pgconn.PgError
	if !errors.Is(err, errNoCopy) && !(errors.As(err, &pgErr) && pgErr.Code == "23505") {
		return false, fmt.Errorf("COPY: %w", interpretError(ctx, err))
	}
	if err := t.q.RunBulkRollback(ctx); err != nil {
		return false, fmt.Errorf("COPY: roll back to before it: %w", interpretError(ctx, err))
	}
	return false, nil
}

// copyEvents appends events by COPY, in order, when the transaction may
// (see above); it reports false, having written nothing, when it may not.
func (t *tx) copyEvents(ctx context.Context, events []store.Event) (bool, error) {
	if t.conn == nil || len(events) < copyMinRows {
		return false, nil
	}
	rows := make([][]any, len(events))
	for i, e := range events {
		if !t.copied[e.RunID] {
			return false, nil
		}
		rows[i] = []any{e.RunID, e.At, e.Kind, e.Step, int64(e.Occurrence), int64(e.Attempt), e.Detail}
	}
	err := t.copyFrom(ctx, "events", eventCopyColumns, rows)
	switch {
	case errors.Is(err, errNoCopy):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("append %d events: %w", len(events), interpretError(ctx, err))
	}
	t.appended = true
	return true, nil
}

// copyFrom runs COPY of rows into table of the store's schema, on the
// connection of the transaction.
func (t *tx) copyFrom(ctx context.Context, table string, columns []string, rows [][]any) error {
	err := t.conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return errNoCopy
		}
		n, err := sc.Conn().CopyFrom(ctx, pgx.Identifier{t.s.schema, table}, columns, pgx.CopyFromRows(rows))
		if err == nil && n != int64(len(rows)) {
			err = fmt.Errorf("COPY stored %d of %d rows", n, len(rows))
		}
		return err
	})
	if errors.Is(err, sql.ErrConnDone) {
		return fmt.Errorf("COPY into %s: %w", table, err)
	}
	return err
}

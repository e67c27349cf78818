package sqlitestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/flowlite/flowlite/dbgen/sqlitedb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

func (r reader) RunGet(ctx context.Context, id string) (store.Run, error) {
	row, err := r.q.RunGet(ctx, id)
	if err != nil {
		return store.Run{}, fmt.Errorf("get run %s: %w", id, interpretError(err))
	}
	return runFromRow(row), nil
}

func (r reader) RunList(ctx context.Context, p store.RunListParams) ([]store.Run, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := r.q.RunList(ctx, sqlitedb.RunListParams{
		Status: string(p.Status), Workflow: p.Workflow, Queue: p.Queue,
		CreatedSince: p.Since, CreatedBefore: p.Before, MaxRuns: int64(limit),
		IDPrefix: p.IDPrefix, ErrorText: p.ErrorText, InputField: p.InputField, InputValue: p.InputValue,
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", interpretError(err))
	}
	runs := make([]store.Run, len(rows))
	for i, row := range rows {
		runs[i] = runFromRow(row)
	}
	return runs, nil
}

func (r reader) RunCountByStatus(ctx context.Context) (map[flowtype.RunStatus]int64, error) {
	rows, err := r.q.RunCountByStatus(ctx)
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", interpretError(err))
	}
	counts := make(map[flowtype.RunStatus]int64, len(rows))
	for _, row := range rows {
		counts[flowtype.RunStatus(row.Status)] = row.Runs
	}
	return counts, nil
}

func (r reader) RunCountUnrunnable(ctx context.Context, known []flowtype.WorkflowKey) ([]store.UnrunnableCount, error) {
	rows, err := r.q.RunCountUnrunnable(ctx, knownJSON(known))
	if err != nil {
		return nil, fmt.Errorf("count unrunnable runs: %w", interpretError(err))
	}
	counts := make([]store.UnrunnableCount, len(rows))
	for i, row := range rows {
		counts[i] = store.UnrunnableCount{
			Workflow: flowtype.WorkflowKey{Name: row.Workflow, Version: int(row.Version)},
			Runs:     row.Runs,
		}
	}
	return counts, nil
}

func (t *tx) RunInsert(ctx context.Context, p store.RunInsertParams) (bool, error) {
	states, err := store.UniqueStatesMask(p)
	if err != nil {
		return false, err
	}
	n, err := t.q.RunInsert(ctx, sqlitedb.RunInsertParams{
		ID: p.ID, Workflow: p.Workflow.Name, Version: int64(p.Workflow.Version), Queue: p.Queue,
		Priority: int64(p.Priority), Input: p.Input, RunAt: p.RunAt, Deadline: optional(p.Deadline),
		ParentID: optionalString(p.ParentID), UniqueKey: optionalString(p.UniqueKey), UniqueStates: states, CreatedAt: p.Now,
	})
	if err != nil {
		return false, fmt.Errorf("insert run %s: %w", p.ID, interpretError(err))
	}
	if n == 1 {
		if err := t.setStartOptions(ctx, p); err != nil {
			return false, err
		}
	}
	return n == 1, nil
}

// RunClaim claims one priority at a time, highest first: a seek finds the
// next priority that has unleased runs, and a range of runs_ready gives the
// ones due at that priority. A claim so never reads the runs that wait for
// a later time, which a single query ordered by priority would have to step
// over (SQLite cannot range over run_at across priorities).
func (t *tx) RunClaim(ctx context.Context, p store.RunClaimParams) ([]store.Run, error) {
	known := knownJSON(p.Known)
	var runs []store.Run
	atMost := int64(math.MaxInt64)
	for len(runs) < p.Max {
		next, err := t.q.RunReadyNextPriority(ctx, sqlitedb.RunReadyNextPriorityParams{Queue: p.Queue, AtMost: atMost})
		if err != nil {
			return nil, fmt.Errorf("claim runs of queue %s: %w", p.Queue, interpretError(err))
		}
		if len(next) == 0 {
			break
		}
		rows, err := t.q.RunClaim(ctx, sqlitedb.RunClaimParams{
			Owner: &p.Owner, LeaseExpiresAt: &p.LeaseExpiresAt, Now: p.Now, Queue: p.Queue,
			Priority: next[0], Known: known, MaxRuns: int64(p.Max - len(runs)),
		})
		if err != nil {
			return nil, fmt.Errorf("claim runs of queue %s: %w", p.Queue, interpretError(err))
		}
		for _, row := range rows {
			runs = append(runs, runFromRow(row))
		}
		if next[0] == math.MinInt64 {
			break
		}
		atMost = next[0] - 1
	}
	return runs, nil
}

func (t *tx) RunHeartbeat(ctx context.Context, l store.Lease, expiresAt, now int64) (bool, error) {
	cancel, err := t.q.RunHeartbeat(ctx, sqlitedb.RunHeartbeatParams{
		LeaseExpiresAt: &expiresAt, Now: now, ID: l.RunID, Owner: &l.Owner, Fence: l.Fence,
	})
	if err != nil {
		return false, fenced("heartbeat", l, interpretError(err))
	}
	return cancel != 0, nil
}

func (t *tx) RunLeaseCheck(ctx context.Context, l store.Lease) (bool, error) {
	cancel, err := t.q.RunLeaseCheck(ctx, sqlitedb.RunLeaseCheckParams{ID: l.RunID, Owner: &l.Owner, Fence: l.Fence})
	if err != nil {
		return false, fenced("check lease", l, interpretError(err))
	}
	return cancel != 0, nil
}

func (t *tx) RunStartCompensating(ctx context.Context, l store.Lease, errMsg string, now int64) error {
	n, err := t.q.RunStartCompensating(ctx, sqlitedb.RunStartCompensatingParams{
		Error: errMsg, Now: now, ID: l.RunID, Owner: &l.Owner, Fence: l.Fence,
	})
	return fencedRows("start compensating", l, n, err)
}

func (t *tx) RunRelease(ctx context.Context, l store.Lease, p store.RunReleaseParams) error {
	status := flowtype.StatusPending
	if p.Waiting {
		status = flowtype.StatusWaiting
	}
	n, err := t.q.RunRelease(ctx, sqlitedb.RunReleaseParams{
		Status: string(status), WakeSeq: p.WakeSeq, RunAt: p.RunAt, Now: p.Now,
		ID: l.RunID, Owner: &l.Owner, Fence: l.Fence,
	})
	return fencedRows("release", l, n, err)
}

func (t *tx) RunWake(ctx context.Context, id string, now int64) (bool, error) {
	n, err := t.q.RunWake(ctx, sqlitedb.RunWakeParams{Now: now, ID: id})
	if err != nil {
		return false, fmt.Errorf("wake run %s: %w", id, interpretError(err))
	}
	return n == 1, nil
}

func (t *tx) RunCancelChildren(ctx context.Context, parentID string, now int64) ([]string, error) {
	ids, err := t.q.RunCancelChildren(ctx, sqlitedb.RunCancelChildrenParams{Now: now, ParentID: &parentID})
	if err != nil {
		return nil, fmt.Errorf("cancel children of run %s: %w", parentID, interpretError(err))
	}
	return ids, nil
}

func (t *tx) RunFinish(ctx context.Context, l store.Lease, p store.RunFinishParams) error {
	n, err := t.q.RunFinish(ctx, sqlitedb.RunFinishParams{
		Status: string(p.Status), Output: p.Output, Error: p.Error, Reason: p.Reason,
		FinishedAt: optional(p.FinishedAt), Now: p.Now, ID: l.RunID, Owner: &l.Owner, Fence: l.Fence,
	})
	return fencedRows("finish", l, n, err)
}

// RunFinishMany finishes the runs of items one by one: the writer's
// transaction already gathers many callers' writes, and a statement per run
// costs SQLite no round trip.
func (t *tx) RunFinishMany(ctx context.Context, items []store.RunFinishItem) ([]int, error) {
	var lost []int
	for i, it := range items {
		err := t.RunFinish(ctx, it.Lease, it.Finish)
		if errors.Is(err, store.ErrLeaseLost) {
			lost = append(lost, i)
			continue
		}
		if err != nil {
			return nil, err
		}
		if it.Step != nil {
			if err := t.StepComplete(ctx, *it.Step); err != nil {
				return nil, err
			}
		}
	}
	return lost, nil
}

func (t *tx) RunRescue(ctx context.Context, now int64, limit int) ([]store.RescuedRun, error) {
	// Two statements, because RETURNING cannot report the expired deadline;
	// the write transaction keeps them consistent.
	expired, err := t.q.RunListExpiredLeases(ctx, sqlitedb.RunListExpiredLeasesParams{Now: &now, MaxRuns: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("rescue runs: %w", interpretError(err))
	}
	if len(expired) == 0 {
		return nil, nil
	}
	deadlines := make(map[string]int64, len(expired))
	ids := make([]string, len(expired))
	for i, row := range expired {
		deadlines[row.ID], ids[i] = deref(row.LeaseExpiresAt), row.ID
	}
	idsJSON, _ := json.Marshal(ids) // a []string always marshals
	rows, err := t.q.RunRescue(ctx, sqlitedb.RunRescueParams{Now: now, Ids: string(idsJSON)})
	if err != nil {
		return nil, fmt.Errorf("rescue runs: %w", interpretError(err))
	}
	rescued := make([]store.RescuedRun, len(rows))
	for i, row := range rows {
		rescued[i] = store.RescuedRun{ID: row.ID, LeaseExpiresAt: deadlines[row.ID], Fence: row.Fence}
	}
	return rescued, nil
}

func (t *tx) RunCancelIdle(ctx context.Context, id, errMsg string, now int64) (bool, error) {
	n, err := t.q.RunCancelIdle(ctx, sqlitedb.RunCancelIdleParams{Error: errMsg, Now: &now, ID: id})
	if err != nil {
		return false, fmt.Errorf("cancel idle run %s: %w", id, interpretError(err))
	}
	return n == 1, nil
}

func (t *tx) RunCancelToUnwind(ctx context.Context, id, errMsg string, now int64) (bool, error) {
	n, err := t.q.RunCancelToUnwind(ctx, sqlitedb.RunCancelToUnwindParams{Error: errMsg, Now: now, ID: id})
	if err != nil {
		return false, fmt.Errorf("cancel run %s to unwind it: %w", id, interpretError(err))
	}
	return n == 1, nil
}

func (t *tx) RunGetForUpdate(ctx context.Context, id string) (store.Run, error) {
	row, err := t.q.RunGetForUpdate(ctx, id)
	if err != nil {
		return store.Run{}, fmt.Errorf("get run %s to update: %w", id, interpretError(err))
	}
	return runFromRow(row), nil
}

func (t *tx) RunRequestCancel(ctx context.Context, id string, now int64) (bool, error) {
	n, err := t.q.RunRequestCancel(ctx, sqlitedb.RunRequestCancelParams{Now: now, ID: id})
	if err != nil {
		return false, fmt.Errorf("request cancel of run %s: %w", id, interpretError(err))
	}
	return n == 1, nil
}

func (t *tx) RunSetStatus(ctx context.Context, p store.RunSetStatusParams) error {
	n, err := t.q.RunSetStatus(ctx, sqlitedb.RunSetStatusParams{
		Status: string(p.Status), Reason: p.Reason, RunAt: p.RunAt, FinishedAt: optional(p.FinishedAt),
		Now: p.Now, ID: p.ID, Expected: string(p.Expected),
	})
	if err != nil {
		return fmt.Errorf("set status of run %s: %w", p.ID, interpretError(err))
	}
	if n == 0 {
		return fmt.Errorf("set status of run %s to %s: %w: run is not %s or is leased", p.ID, p.Status, flowtype.ErrConflict, p.Expected)
	}
	return nil
}

// fenced turns "no row" from a fenced statement into store.ErrLeaseLost.
func fenced(op string, l store.Lease, err error) error {
	if errors.Is(err, flowtype.ErrRunNotFound) {
		return fmt.Errorf("%s run %s: %w (fence %d, owner %s)", op, l.RunID, store.ErrLeaseLost, l.Fence, l.Owner)
	}
	return fmt.Errorf("%s run %s: %w", op, l.RunID, err)
}

func fencedRows(op string, l store.Lease, n int64, err error) error {
	if err != nil {
		return fenced(op, l, interpretError(err))
	}
	if n == 0 {
		return fenced(op, l, flowtype.ErrRunNotFound)
	}
	return nil
}

func knownJSON(known []flowtype.WorkflowKey) string {
	keys := make([]string, len(known))
	for i, k := range known {
		keys[i] = k.String()
	}
	b, _ := json.Marshal(keys) // a []string always marshals
	return string(b)
}

func runFromRow(r sqlitedb.Run) store.Run {
	return store.Run{
		ID: r.ID, Workflow: r.Workflow, Version: int(r.Version), Queue: r.Queue, Priority: int(r.Priority),
		Status: flowtype.RunStatus(r.Status), Input: r.Input, Output: r.Output, Error: r.Error, Reason: r.Reason,
		CancelRequested: r.CancelRequested != 0, RunAt: r.RunAt, Deadline: deref(r.Deadline),
		ParentID: deref(r.ParentID), WakeSeq: r.WakeSeq, Fence: r.Fence,
		LeaseOwner: deref(r.LeaseOwner), LeaseExpiresAt: deref(r.LeaseExpiresAt),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: deref(r.FinishedAt),
		UniqueKey: deref(r.UniqueKey), StartedAt: deref(r.StartedAt),
		RequeuedFrom: deref(r.RequeuedFrom), RequeuedAs: deref(r.RequeuedAs),
		StartOptions: startOptionsFromRow(r),
	}
}

// RunInsertMany inserts ps with one prepared statement per chunk of
// store.InsertManyChunk runs. A repeated ID is tried at its first occurrence
// only: the later ones are reported false.
func (t *tx) RunInsertMany(ctx context.Context, ps []store.RunInsertParams) ([]bool, error) {
	inserted := make([]bool, len(ps))
	first := make(map[string]int, len(ps)) // ID → index of its first occurrence
	for start := 0; start < len(ps); start += store.InsertManyChunk {
		chunk := ps[start:min(start+store.InsertManyChunk, len(ps))]
		rows := make([]store.RunInsertRow, 0, len(chunk))
		for i, p := range chunk {
			if _, dup := first[p.ID]; dup {
				continue
			}
			first[p.ID] = start + i
			states, err := store.UniqueStatesMask(p)
			if err != nil {
				return nil, err
			}
			rows = append(rows, store.NewRunInsertRow(p, states))
		}
		if len(rows) == 0 {
			continue
		}
		doc, err := json.Marshal(rows)
		if err != nil {
			return nil, fmt.Errorf("insert %d runs: %w", len(rows), err)
		}
		ids, err := t.q.RunInsertMany(ctx, string(doc))
		if err != nil {
			return nil, fmt.Errorf("insert %d runs: %w", len(rows), interpretError(err))
		}
		for _, id := range ids {
			inserted[first[id]] = true
			if err := t.setStartOptions(ctx, ps[first[id]]); err != nil {
				return nil, err
			}
		}
	}
	return inserted, nil
}

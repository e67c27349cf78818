package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

func (r reader) RunGet(ctx context.Context, id string) (store.Run, error) {
	row, err := r.q.RunGet(ctx, id)
	if err != nil {
		return store.Run{}, fmt.Errorf("get run %s: %w", id, interpretError(ctx, err))
	}
	return runFromRow(row), nil
}

func (r reader) RunList(ctx context.Context, p store.RunListParams) ([]store.Run, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := r.q.RunList(ctx, pgdb.RunListParams{
		Status: string(p.Status), Workflow: p.Workflow, Queue: p.Queue,
		CreatedSince: p.Since, CreatedBefore: p.Before, MaxRuns: int64(limit),
		IDPrefix: p.IDPrefix, ErrorText: p.ErrorText, InputField: p.InputField, InputValue: p.InputValue,
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", interpretError(ctx, err))
	}
	return runsFromRows(rows), nil
}

func (r reader) RunCountByStatus(ctx context.Context) (map[flowtype.RunStatus]int64, error) {
	rows, err := r.q.RunCountByStatus(ctx)
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", interpretError(ctx, err))
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
		return nil, fmt.Errorf("count unrunnable runs: %w", interpretError(ctx, err))
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

// RunInsert inserts a run. With a unique key it first takes the key's
// advisory lock (UniqueKeyLock): the insert's test of the key's holds then
// reads, at the start of its statement, every hold a transaction that had
// the key before committed, which is what SQLite's write lock gives. The
// key's other guarantee, one holder for good, is the unique index
// runs_unique, which needs no lock.
func (t *tx) RunInsert(ctx context.Context, p store.RunInsertParams) (bool, error) {
	states, err := store.UniqueStatesMask(p)
	if err != nil {
		return false, err
	}
	if p.UniqueKey != "" {
		if err := t.lockUniqueKey(ctx, p.Workflow.Name, p.UniqueKey); err != nil {
			return false, fmt.Errorf("insert run %s: %w", p.ID, err)
		}
	}
	n, err := t.q.RunInsert(ctx, pgdb.RunInsertParams{
		ID: p.ID, Workflow: p.Workflow.Name, Version: int64(p.Workflow.Version), Queue: p.Queue,
		Priority: int64(p.Priority), Input: nonNil(p.Input), RunAt: p.RunAt, Deadline: nullInt(p.Deadline),
		ParentID: nullString(p.ParentID), UniqueKey: nullString(p.UniqueKey), UniqueStates: states, CreatedAt: p.Now,
	})
	if err != nil {
		return false, fmt.Errorf("insert run %s: %w", p.ID, interpretError(ctx, err))
	}
	if n == 0 {
		return false, nil
	}
	if err := t.setStartOptions(ctx, p); err != nil {
		return false, err
	}
	if err := t.wakeRuns(ctx, store.WakeReady, p.ID); err != nil {
		return false, fmt.Errorf("insert run %s: %w", p.ID, err)
	}
	return true, nil
}

// lockUniqueKey takes the advisory lock of a unique key until the
// transaction ends.
func (t *tx) lockUniqueKey(ctx context.Context, workflow, key string) error {
	if err := t.q.UniqueKeyLock(ctx, uniqueKeyLockID(t.s.schema, workflow, key)); err != nil {
		return fmt.Errorf("lock unique key %q of %s: %w", key, workflow, interpretError(ctx, err))
	}
	return nil
}

// RunClaim claims one priority at a time, highest first, as the SQLite
// adapter does: one statement lists the priorities that have unleased runs
// (a seek each), and a range of runs_ready gives the ones due at each
// priority, so a claim never reads the runs that wait for a later time.
// Unlike SQLite, where a statement costs no round trip, the priorities are
// learnt at once rather than probed again after each one: a claim that
// takes fewer runs than asked costs two statements, not three. Each round
// locks its runs FOR UPDATE SKIP LOCKED, so concurrent claimers never wait
// on each other and never share a run.
func (t *tx) RunClaim(ctx context.Context, p store.RunClaimParams) ([]store.Run, error) {
	known := knownJSON(p.Known)
	server, heldBefore, err := t.s.serverGate(ctx, t.q, p.Now)
	if err != nil {
		return nil, fmt.Errorf("claim runs of queue %s: %w", p.Queue, interpretError(ctx, err))
	}
	var runs []store.Run
	atMost := int64(math.MaxInt64)
	for {
		prios, err := t.q.RunReadyPriorities(ctx, pgdb.RunReadyPrioritiesParams{Queue: p.Queue, AtMost: atMost, MaxPriorities: claimPriorities})
		if err != nil {
			return nil, fmt.Errorf("claim runs of queue %s: %w", p.Queue, interpretError(ctx, err))
		}
		for _, prio := range prios {
			rows, err := t.q.RunClaim(ctx, pgdb.RunClaimParams{
				Owner: p.Owner, LeaseExpiresAt: p.LeaseExpiresAt, Now: p.Now, Queue: p.Queue,
				Priority: prio, Known: known, MaxRuns: int64(p.Max - len(runs)),
				ServerStarted: server, HeldBefore: heldBefore,
			})
			if err != nil {
				return nil, fmt.Errorf("claim runs of queue %s: %w", p.Queue, interpretError(ctx, err))
			}
			for _, row := range rows {
				runs = append(runs, runFromRow(row))
			}
			if len(runs) >= p.Max {
				return runs, nil
			}
		}
		last := len(prios) - 1
		if len(prios) < claimPriorities || prios[last] == math.MinInt64 {
			return runs, nil
		}
		atMost = prios[last] - 1
	}
}

// claimPriorities is how many priorities RunClaim learns per statement:
// a queue rarely has more, and one with more is read on in further ones.
const claimPriorities = 32

func (t *tx) RunHeartbeat(ctx context.Context, l store.Lease, expiresAt, now int64) (bool, error) {
	cancel, err := t.q.RunHeartbeat(ctx, pgdb.RunHeartbeatParams{
		LeaseExpiresAt: someInt(expiresAt), Now: now, ID: l.RunID, Owner: someString(l.Owner), Fence: l.Fence,
	})
	if err != nil {
		return false, fenced("heartbeat", l, interpretError(ctx, err))
	}
	return cancel, nil
}

// RunLeaseCheck locks the run's row (FOR NO KEY UPDATE) while it proves the
// lease, so that the proof holds until the transaction commits: a rescuer
// or a claimer skips the row, and any other update of it waits.
func (t *tx) RunLeaseCheck(ctx context.Context, l store.Lease) (bool, error) {
	cancel, err := t.q.RunLeaseCheck(ctx, pgdb.RunLeaseCheckParams{ID: l.RunID, Owner: someString(l.Owner), Fence: l.Fence})
	if err != nil {
		return false, fenced("check lease", l, interpretError(ctx, err))
	}
	return cancel, nil
}

func (t *tx) RunStartCompensating(ctx context.Context, l store.Lease, errMsg string, now int64) error {
	n, err := t.q.RunStartCompensating(ctx, pgdb.RunStartCompensatingParams{
		Error: errMsg, Now: now, ID: l.RunID, Owner: someString(l.Owner), Fence: l.Fence,
	})
	return fencedRows(ctx, "start compensating", l, n, err)
}

func (t *tx) RunRelease(ctx context.Context, l store.Lease, p store.RunReleaseParams) error {
	status := flowtype.StatusPending
	if p.Waiting {
		status = flowtype.StatusWaiting
	}
	n, err := t.q.RunRelease(ctx, pgdb.RunReleaseParams{
		Status: string(status), WakeSeq: p.WakeSeq, RunAt: p.RunAt, Now: p.Now,
		ID: l.RunID, Owner: l.Owner, Fence: l.Fence,
	})
	return fencedRows(ctx, "release", l, n, err)
}

func (t *tx) RunWake(ctx context.Context, id string, now int64) (bool, error) {
	n, err := t.q.RunWake(ctx, pgdb.RunWakeParams{Now: now, ID: id})
	if err != nil {
		return false, fmt.Errorf("wake run %s: %w", id, interpretError(ctx, err))
	}
	if n == 0 {
		return false, nil
	}
	if err := t.wakeRuns(ctx, store.WakeReady, id); err != nil {
		return false, fmt.Errorf("wake run %s: %w", id, err)
	}
	return true, nil
}

func (t *tx) RunCancelChildren(ctx context.Context, parentID string, now int64) ([]string, error) {
	ids, err := t.q.RunCancelChildren(ctx, pgdb.RunCancelChildrenParams{Now: now, ParentID: parentID})
	if err != nil {
		return nil, fmt.Errorf("cancel children of run %s: %w", parentID, interpretError(ctx, err))
	}
	if err := t.wakeRuns(ctx, store.WakeCancel, ids...); err != nil {
		return nil, fmt.Errorf("cancel children of run %s: %w", parentID, err)
	}
	return ids, nil
}

func (t *tx) RunFinish(ctx context.Context, l store.Lease, p store.RunFinishParams) error {
	n, err := t.q.RunFinish(ctx, pgdb.RunFinishParams{
		Status: string(p.Status), Output: p.Output, Error: p.Error, Reason: p.Reason,
		FinishedAt: nullInt(p.FinishedAt), Now: p.Now, ID: l.RunID, Owner: someString(l.Owner), Fence: l.Fence,
	})
	return fencedRows(ctx, "finish", l, n, err)
}

// RunFinishMany finishes the runs of items in one statement (the query's
// doc says how). A run missing from its result lost its lease; a run whose
// step was not completed fails the call, as StepComplete would have.
func (t *tx) RunFinishMany(ctx context.Context, items []store.RunFinishItem) ([]int, error) {
	if len(items) == 0 {
		return nil, nil
	}
	rows := make([]finishRow, len(items))
	for i, it := range items {
		rows[i] = newFinishRow(it)
	}
	doc, err := json.Marshal(rows)
	if err != nil {
		return nil, fmt.Errorf("finish %d runs: %w", len(items), err)
	}
	if err := t.q.SeqScanOffForTx(ctx); err != nil {
		return nil, fmt.Errorf("finish %d runs: %w", len(items), interpretError(ctx, err))
	}
	done, err := t.q.RunFinishMany(ctx, doc)
	if err != nil {
		return nil, fmt.Errorf("finish %d runs: %w", len(items), interpretError(ctx, err))
	}
	steps := make(map[string]int64, len(done))
	for _, d := range done {
		steps[d.ID] = d.Steps
	}
	var lost []int
	for i, it := range items {
		n, ok := steps[it.Lease.RunID]
		switch {
		case !ok:
			lost = append(lost, i)
		case it.Step != nil && n == 0:
			return nil, fmt.Errorf("complete step %s: %w", it.Step.Key, flowtype.ErrConflict)
		}
	}
	return lost, nil
}

// RunRescue reads the expired leases, locking their rows and skipping the
// rows a worker holds, then clears them: the lock keeps the deadlines it
// read true until the update, which repeats the expiry test anyway.
func (t *tx) RunRescue(ctx context.Context, now int64, limit int) ([]store.RescuedRun, error) {
	server, heldBefore, err := t.s.serverGate(ctx, t.q, now)
	if err != nil {
		return nil, fmt.Errorf("rescue runs: %w", interpretError(ctx, err))
	}
	expired, err := t.q.RunListExpiredLeases(ctx, pgdb.RunListExpiredLeasesParams{
		Now: someInt(now), MaxRuns: int32(min(limit, math.MaxInt32)), ServerStarted: server, HeldBefore: heldBefore,
	})
	if err != nil {
		return nil, fmt.Errorf("rescue runs: %w", interpretError(ctx, err))
	}
	if len(expired) == 0 {
		return nil, nil
	}
	deadlines := make(map[string]int64, len(expired))
	ids := make([]string, len(expired))
	for i, row := range expired {
		deadlines[row.ID], ids[i] = row.LeaseExpiresAt.Int64, row.ID
	}
	idsJSON, _ := json.Marshal(ids) // a []string always marshals
	rows, err := t.q.RunRescue(ctx, pgdb.RunRescueParams{Now: now, Ids: string(idsJSON)})
	if err != nil {
		return nil, fmt.Errorf("rescue runs: %w", interpretError(ctx, err))
	}
	rescued := make([]store.RescuedRun, len(rows))
	ids = ids[:0]
	for i, row := range rows {
		rescued[i] = store.RescuedRun{ID: row.ID, LeaseExpiresAt: deadlines[row.ID], Fence: row.Fence}
		ids = append(ids, row.ID)
	}
	if err := t.wakeRuns(ctx, store.WakeReady, ids...); err != nil {
		return nil, fmt.Errorf("rescue runs: %w", err)
	}
	return rescued, nil
}

func (t *tx) RunCancelIdle(ctx context.Context, id, errMsg string, now int64) (bool, error) {
	n, err := t.q.RunCancelIdle(ctx, pgdb.RunCancelIdleParams{Error: errMsg, Now: now, ID: id})
	if err != nil {
		return false, fmt.Errorf("cancel idle run %s: %w", id, interpretError(ctx, err))
	}
	return n == 1, nil
}

func (t *tx) RunCancelToUnwind(ctx context.Context, id, errMsg string, now int64) (bool, error) {
	n, err := t.q.RunCancelToUnwind(ctx, pgdb.RunCancelToUnwindParams{Error: errMsg, Now: now, ID: id})
	if err != nil {
		return false, fmt.Errorf("cancel run %s to unwind it: %w", id, interpretError(ctx, err))
	}
	if n == 0 {
		return false, nil
	}
	if err := t.wakeRuns(ctx, store.WakeReady, id); err != nil {
		return false, fmt.Errorf("cancel run %s to unwind it: %w", id, err)
	}
	return true, nil
}

func (t *tx) RunGetForUpdate(ctx context.Context, id string) (store.Run, error) {
	row, err := t.q.RunGetForUpdate(ctx, id)
	if err != nil {
		return store.Run{}, fmt.Errorf("get run %s to update: %w", id, interpretError(ctx, err))
	}
	return runFromRow(row), nil
}

func (t *tx) RunRequestCancel(ctx context.Context, id string, now int64) (bool, error) {
	n, err := t.q.RunRequestCancel(ctx, pgdb.RunRequestCancelParams{Now: now, ID: id})
	if err != nil {
		return false, fmt.Errorf("request cancel of run %s: %w", id, interpretError(ctx, err))
	}
	if n == 0 {
		return false, nil
	}
	if err := t.wakeRuns(ctx, store.WakeCancel, id); err != nil {
		return false, fmt.Errorf("request cancel of run %s: %w", id, err)
	}
	return true, nil
}

func (t *tx) RunSetStatus(ctx context.Context, p store.RunSetStatusParams) error {
	n, err := t.q.RunSetStatus(ctx, pgdb.RunSetStatusParams{
		Status: string(p.Status), Reason: p.Reason, RunAt: p.RunAt, FinishedAt: nullInt(p.FinishedAt),
		Now: p.Now, ID: p.ID, Expected: string(p.Expected),
	})
	if err != nil {
		return fmt.Errorf("set status of run %s: %w", p.ID, interpretError(ctx, err))
	}
	if n == 0 {
		return fmt.Errorf("set status of run %s to %s: %w: run is not %s or is leased", p.ID, p.Status, flowtype.ErrConflict, p.Expected)
	}
	if p.Status == flowtype.StatusPending { // resumed or retried by an operator
		if err := t.wakeRuns(ctx, store.WakeReady, p.ID); err != nil {
			return fmt.Errorf("set status of run %s: %w", p.ID, err)
		}
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

func fencedRows(ctx context.Context, op string, l store.Lease, n int64, err error) error {
	if err != nil {
		return fenced(op, l, interpretError(ctx, err))
	}
	if n == 0 {
		return fenced(op, l, flowtype.ErrRunNotFound)
	}
	return nil
}

// knownJSON encodes workflow versions as the JSON array of "name:version"
// strings the claim queries unpack with jsonb_array_elements_text (an
// array parameter would need lib/pq's array type under database/sql).
func knownJSON(known []flowtype.WorkflowKey) string {
	keys := make([]string, len(known))
	for i, k := range known {
		keys[i] = k.String()
	}
	b, _ := json.Marshal(keys) // a []string always marshals
	return string(b)
}

func runsFromRows(rows []pgdb.Run) []store.Run {
	runs := make([]store.Run, len(rows))
	for i, row := range rows {
		runs[i] = runFromRow(row)
	}
	return runs
}

func runFromRow(r pgdb.Run) store.Run {
	return store.Run{
		ID: r.ID, Workflow: r.Workflow, Version: int(r.Version), Queue: r.Queue, Priority: int(r.Priority),
		Status: flowtype.RunStatus(r.Status), Input: r.Input, Output: r.Output, Error: r.Error, Reason: r.Reason,
		CancelRequested: r.CancelRequested, RunAt: r.RunAt, Deadline: r.Deadline.Int64,
		ParentID: r.ParentID.String, WakeSeq: r.WakeSeq, Fence: r.Fence,
		LeaseOwner: r.LeaseOwner.String, LeaseExpiresAt: r.LeaseExpiresAt.Int64,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt.Int64,
		UniqueKey: r.UniqueKey.String, StartedAt: r.StartedAt.Int64,
		RequeuedFrom: r.RequeuedFrom.String, RequeuedAs: r.RequeuedAs.String,
		StartOptions: startOptionsFromRow(r),
	}
}

// nonNil returns b, or an empty slice for nil: a nil []byte is NULL to the
// driver, and the input and payload columns are NOT NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// RunInsertMany inserts ps with one statement per chunk of store.InsertManyChunk
// runs, or one COPY when the chunk has no unique key (bulk.go). It first
// takes the advisory locks of the chunk's unique keys, in the order of
// their lock IDs so that two batches sharing keys cannot deadlock, as
// RunInsert takes its key's. A repeated ID is tried at its first
// occurrence only: the later ones are reported false.
func (t *tx) RunInsertMany(ctx context.Context, ps []store.RunInsertParams) ([]bool, error) {
	inserted := make([]bool, len(ps))
	first := make(map[string]int, len(ps)) // ID → index of its first occurrence
	for start := 0; start < len(ps); start += store.InsertManyChunk {
		chunk := ps[start:min(start+store.InsertManyChunk, len(ps))]
		var kept []int // indexes in ps of the chunk's runs to insert
		var states []int64
		var locks []int64
		for i, p := range chunk {
			if _, dup := first[p.ID]; dup {
				continue
			}
			first[p.ID] = start + i
			mask, err := store.UniqueStatesMask(p)
			if err != nil {
				return nil, err
			}
			if p.UniqueKey != "" {
				locks = append(locks, uniqueKeyLockID(t.s.schema, p.Workflow.Name, p.UniqueKey))
			}
			kept = append(kept, start+i)
			states = append(states, mask)
		}
		if len(kept) == 0 {
			continue
		}
		ids, err := t.insertChunk(ctx, ps, kept, states, locks)
		if err != nil {
			return nil, fmt.Errorf("insert %d runs: %w", len(kept), err)
		}
		done := make([]store.RunInsertParams, 0, len(ids))
		for _, id := range ids {
			inserted[first[id]] = true
			done = append(done, ps[first[id]])
		}
		if err := t.wakeInserted(ctx, done); err != nil {
			return nil, fmt.Errorf("insert %d runs: %w", len(kept), err)
		}
	}
	return inserted, nil
}

// insertChunk inserts the runs of ps at kept, whose unique states masks are
// states and whose keys' advisory locks are locks, and returns the IDs it
// inserted: by COPY when no run has a unique key and COPY can take them
// all, by RunInsertMany otherwise.
func (t *tx) insertChunk(ctx context.Context, ps []store.RunInsertParams, kept []int, states, locks []int64) ([]string, error) {
	if len(locks) == 0 {
		rows := make([][]any, len(kept))
		for i, k := range kept {
			rows[i] = copyRunRow(ps[k], states[i])
		}
		copied, err := t.copyRuns(ctx, rows)
		if err != nil {
			return nil, err
		}
		if copied {
			ids := make([]string, len(kept))
			for i, k := range kept {
				ids[i] = ps[k].ID
			}
			return ids, nil
		}
	}
	slices.Sort(locks)
	for _, id := range slices.Compact(locks) {
		if err := t.q.UniqueKeyLock(ctx, id); err != nil {
			return nil, fmt.Errorf("lock unique key: %w", interpretError(ctx, err))
		}
	}
	rows := make([]store.RunInsertRow, len(kept))
	for i, k := range kept {
		rows[i] = store.NewRunInsertRow(ps[k], states[i])
	}
	doc, err := json.Marshal(rows)
	if err != nil {
		return nil, err
	}
	ids, err := t.q.RunInsertMany(ctx, doc)
	if err != nil {
		return nil, interpretError(ctx, err)
	}
	got := make(map[string]bool, len(ids))
	for _, id := range ids {
		got[id] = true
	}
	for _, k := range kept {
		if got[ps[k].ID] {
			if err := t.setStartOptions(ctx, ps[k]); err != nil { // a statement only for runs that have options
				return nil, err
			}
		}
	}
	return ids, nil
}

package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// maintenanceTests are the conformance tests of store.MaintenanceTx and, for
// stores that implement it, store.FileMaintainer; Exercise runs them with
// the others.
func maintenanceTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"RunDeleteFinishedStatesAndAge", testRunDeleteFinishedStatesAndAge},
		{"RunDeleteFinishedMaxOldestFirst", testRunDeleteFinishedMaxOldestFirst},
		{"RunDeleteFinishedRejectsBadInput", testRunDeleteFinishedRejectsBadInput},
		{"RunDeleteFinishedParentsAndChildren", testRunDeleteFinishedParentsAndChildren},
		{"FileMaintainer", testFileMaintainer},
	}
}

// finishedRun inserts a run in its own queue, claims it and finishes it in
// status at finishedAt, with history, a step and a signal.
func finishedRun(t *testing.T, s store.Store, p store.RunInsertParams, status flowtype.RunStatus, finishedAt int64) {
	t.Helper()
	p.Queue = "queue-" + p.ID
	insert(t, s, p)
	r := claimQueue(t, s, p.Queue, "w-"+p.ID, base)
	addRecords(t, s, p.ID)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunFinish(ctx, r.Lease(), store.RunFinishParams{
			Status: status, Output: []byte(`"out"`), FinishedAt: finishedAt, Now: finishedAt,
		})
	})
}

// addRecords gives a run a completed step, an event and a signal.
func addRecords(t *testing.T, s store.Store, runID string) {
	t.Helper()
	key := store.StepKey{RunID: runID, Name: "charge", Occurrence: 0}
	beginStep(t, s, key, `{"n":1}`, base)
	completeStep(t, s, key, `{"ok":true}`, false, base)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.EventAppend(ctx, store.Event{RunID: runID, At: base, Kind: "test.event"}); err != nil {
			return err
		}
		_, err := tx.SignalSend(ctx, store.Signal{RunID: runID, Name: "approve", Payload: []byte(`{}`), Key: "k-" + runID, SentAt: base})
		return err
	})
}

// records counts a run's steps, events and signals.
func records(t *testing.T, s store.Store, runID string) (steps, events, signals int) {
	t.Helper()
	ctx := t.Context()
	st, err := s.Reader().StepList(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := s.Reader().EventList(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := s.Reader().SignalList(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	return len(st), len(ev), len(sig)
}

func deleteFinished(t *testing.T, s store.Store, p store.RunDeleteFinishedParams) int {
	t.Helper()
	var n int
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		n, err = tx.RunDeleteFinished(ctx, p)
		return err
	})
	return n
}

func exists(t *testing.T, s store.Store, id string) bool {
	t.Helper()
	_, err := s.Reader().RunGet(t.Context(), id)
	if err != nil && !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Fatalf("get run %s: %v", id, err)
	}
	return err == nil
}

func testRunDeleteFinishedStatesAndAge(t *testing.T, s store.Store) {
	const cutoff = base + 10_000
	finished := []flowtype.RunStatus{flowtype.StatusCompleted, flowtype.StatusFailed, flowtype.StatusCancelled}
	for _, st := range finished {
		finishedRun(t, s, newRun("old-"+string(st)), st, cutoff-1)
		finishedRun(t, s, newRun("edge-"+string(st)), st, cutoff) // not before the cutoff
		finishedRun(t, s, newRun("young-"+string(st)), st, cutoff+5_000)
	}
	// Every unfinished state, each with records.
	unfinished := []string{}
	for _, st := range []flowtype.RunStatus{flowtype.StatusPending, flowtype.StatusRunning, flowtype.StatusCompensating, flowtype.StatusSuspended} {
		id := "live-" + string(st)
		runWithStatus(t, s, id, st)
		addRecords(t, s, id)
		unfinished = append(unfinished, id)
	}
	waiting := runIn(t, s, "live-waiting")
	r := claimQueue(t, s, waiting.Queue, "w", base)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunRelease(ctx, r.Lease(), store.RunReleaseParams{RunAt: base + 3_600_000, Waiting: true, WakeSeq: r.WakeSeq, Now: base})
	})
	addRecords(t, s, waiting.ID)
	unfinished = append(unfinished, waiting.ID)
	// A suspended run resumed by an operator with an old finished_at, so
	// only the state test keeps it.
	runWithStatus(t, s, "live-resumed", flowtype.StatusSuspended)
	addRecords(t, s, "live-resumed")
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunSetStatus(ctx, store.RunSetStatusParams{
			ID: "live-resumed", Expected: flowtype.StatusSuspended, Status: flowtype.StatusPending, RunAt: base, FinishedAt: 1, Now: base,
		})
	})
	unfinished = append(unfinished, "live-resumed")

	for _, st := range finished {
		// A cutoff far in the future still spares unfinished runs.
		if n := deleteFinished(t, s, store.RunDeleteFinishedParams{Status: st, FinishedBefore: cutoff, Max: 100}); n != 1 {
			t.Errorf("delete %s runs finished before the cutoff: deleted %d, want 1", st, n)
		}
		if exists(t, s, "old-"+string(st)) {
			t.Errorf("run old-%s survived", st)
		}
		if steps, events, signals := records(t, s, "old-"+string(st)); steps+events+signals != 0 {
			t.Errorf("deleted run old-%s left %d steps, %d events, %d signals", st, steps, events, signals)
		}
		for _, id := range []string{"edge-" + string(st), "young-" + string(st)} {
			if !exists(t, s, id) {
				t.Errorf("run %s, not older than the cutoff, was deleted", id)
			}
		}
	}
	for _, st := range finished {
		deleteFinished(t, s, store.RunDeleteFinishedParams{Status: st, FinishedBefore: base + 1_000_000_000, Max: 100})
	}
	for _, id := range unfinished {
		if !exists(t, s, id) {
			t.Errorf("unfinished run %s was deleted", id)
			continue
		}
		if steps, events, signals := records(t, s, id); steps != 1 || events < 1 || signals != 1 {
			t.Errorf("unfinished run %s lost records: %d steps, %d events, %d signals", id, steps, events, signals)
		}
	}
	counts, err := s.Reader().RunCountByStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range finished {
		if counts[st] != 0 {
			t.Errorf("%d %s runs left, want 0", counts[st], st)
		}
	}
}

func testRunDeleteFinishedMaxOldestFirst(t *testing.T, s store.Store) {
	for i := range 5 {
		// Inserted newest first, so that insertion order is not age order.
		finishedRun(t, s, newRun(fmt.Sprintf("r%d", i)), flowtype.StatusCompleted, base+int64(100-i))
	}
	p := store.RunDeleteFinishedParams{Status: flowtype.StatusCompleted, FinishedBefore: base + 1_000, Max: 2}
	if n := deleteFinished(t, s, p); n != 2 {
		t.Fatalf("first batch deleted %d, want 2", n)
	}
	var left []string
	for i := range 5 {
		if id := fmt.Sprintf("r%d", i); exists(t, s, id) {
			left = append(left, id)
		}
	}
	if want := []string{"r0", "r1", "r2"}; !slices.Equal(left, want) {
		t.Errorf("after deleting the 2 oldest, runs left %v, want %v", left, want)
	}
	if n := deleteFinished(t, s, p); n != 2 {
		t.Errorf("second batch deleted %d, want 2", n)
	}
	if n := deleteFinished(t, s, p); n != 1 {
		t.Errorf("third batch deleted %d, want 1", n)
	}
	if n := deleteFinished(t, s, p); n != 0 {
		t.Errorf("fourth batch deleted %d, want 0", n)
	}
	// Every batch takes its runs' records with it (flow's
	// TestCleanDeletesInBatchesWhileWorkflowsRun checked this on the raw
	// tables after a clean of thousands of runs in batches).
	for i := range 5 {
		id := fmt.Sprintf("r%d", i)
		if steps, events, signals := records(t, s, id); steps+events+signals != 0 {
			t.Errorf("run %s, deleted in a batch, left %d steps, %d events, %d signals", id, steps, events, signals)
		}
	}
}

func testRunDeleteFinishedRejectsBadInput(t *testing.T, s store.Store) {
	runWithStatus(t, s, "pending", flowtype.StatusPending)
	runWithStatus(t, s, "suspended", flowtype.StatusSuspended)
	for _, p := range []store.RunDeleteFinishedParams{
		{Status: flowtype.StatusPending, FinishedBefore: base + 1_000_000, Max: 10},
		{Status: flowtype.StatusSuspended, FinishedBefore: base + 1_000_000, Max: 10},
		{Status: "", FinishedBefore: base + 1_000_000, Max: 10},
		{Status: flowtype.StatusCompleted, FinishedBefore: base + 1_000_000, Max: 0},
	} {
		var err error
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			_, err = tx.RunDeleteFinished(ctx, p)
			return nil
		})
		if err == nil {
			t.Errorf("RunDeleteFinished(%+v) succeeded, want an error", p)
		}
	}
	for _, id := range []string{"pending", "suspended"} {
		if !exists(t, s, id) {
			t.Errorf("run %s deleted", id)
		}
	}
}

func testRunDeleteFinishedParentsAndChildren(t *testing.T, s store.Store) {
	old := base + 1
	// A waiting parent keeps its finished child: it may still read the
	// child's outcome.
	runWithStatus(t, s, "parent-running", flowtype.StatusRunning)
	child := newRun("child-of-running")
	child.ParentID = "parent-running"
	finishedRun(t, s, child, flowtype.StatusCompleted, old)
	// A finished parent goes, its unfinished child stays and is orphaned.
	finishedRun(t, s, newRun("parent-done"), flowtype.StatusCancelled, old)
	live := newRun("child-live")
	live.ParentID = "parent-done"
	live.Queue = "queue-child-live"
	insertWithStatus(t, s, live, flowtype.StatusRunning)
	// A finished child of a finished parent goes too.
	finishedRun(t, s, newRun("parent-done2"), flowtype.StatusCompleted, old)
	done := newRun("child-done")
	done.ParentID = "parent-done2"
	finishedRun(t, s, done, flowtype.StatusCompleted, old)

	for _, st := range []flowtype.RunStatus{flowtype.StatusCompleted, flowtype.StatusCancelled} {
		deleteFinished(t, s, store.RunDeleteFinishedParams{Status: st, FinishedBefore: base + 1_000, Max: 100})
	}
	for id, want := range map[string]bool{
		"parent-running": true, "child-of-running": true,
		"parent-done": false, "child-live": true,
		"parent-done2": false, "child-done": false,
	} {
		if got := exists(t, s, id); got != want {
			t.Errorf("run %s exists = %v, want %v", id, got, want)
		}
	}
	if r := get(t, s, "child-live"); r.ParentID != "" || r.Status != flowtype.StatusRunning {
		t.Errorf("child of a deleted parent: parent %q, status %s; want no parent, still running", r.ParentID, r.Status)
	}
}

func testFileMaintainer(t *testing.T, s store.Store) {
	fm, ok := s.(store.FileMaintainer)
	if !ok {
		t.Skip("the store does not implement store.FileMaintainer")
	}
	ctx := t.Context()
	for i := range 20 {
		finishedRun(t, s, newRun(fmt.Sprintf("r%02d", i)), flowtype.StatusCompleted, base+1)
	}
	st, err := fm.FileStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Path == "" || st.DBBytes <= 0 || st.WALBytes <= 0 {
		t.Errorf("file stats %+v: want a path, a database and a WAL", st)
	}

	if _, err := fm.Checkpoint(ctx, "SOMETIMES"); err == nil {
		t.Error("checkpoint with an unknown mode succeeded")
	}
	for _, mode := range []flowtype.CheckpointMode{
		flowtype.CheckpointPassive, flowtype.CheckpointFull, flowtype.CheckpointRestart, flowtype.CheckpointTruncate,
	} {
		res, err := fm.Checkpoint(ctx, mode)
		if err != nil {
			t.Fatalf("checkpoint %s: %v", mode, err)
		}
		if res.Mode != mode || res.Busy || res.Checkpointed != res.WALFrames {
			t.Errorf("checkpoint %s with no other connection: %+v, want the whole WAL checkpointed", mode, res)
		}
	}
	if st, err := fm.FileStats(ctx); err != nil || st.WALBytes != 0 {
		t.Errorf("after a TRUNCATE checkpoint: %+v, %v; want an empty WAL", st, err)
	}
	// Writes go on after a checkpoint.
	finishedRun(t, s, newRun("after"), flowtype.StatusCompleted, base+1)

	dir := t.TempDir()
	dst := filepath.Join(dir, "backup.db")
	if err := fm.Backup(ctx, dst); err != nil {
		t.Fatalf("backup: %v", err)
	}
	b, err := os.ReadFile(dst) // not open in SQLite: reading it is safe
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("SQLite format 3\x00")) {
		t.Errorf("backup is not a SQLite database file (%d bytes)", len(b))
	}
	if err := os.WriteFile(filepath.Join(dir, "taken.db"), []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, taken := range []string{dst, filepath.Join(dir, "taken.db")} {
		before, _ := os.ReadFile(taken)
		if err := fm.Backup(ctx, taken); !errors.Is(err, fs.ErrExist) {
			t.Errorf("backup onto existing %s: error %v, want fs.ErrExist", filepath.Base(taken), err)
		}
		if after, _ := os.ReadFile(taken); !bytes.Equal(before, after) {
			t.Errorf("backup onto existing %s changed it", filepath.Base(taken))
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		names := []string{}
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("backup directory holds %v, want only backup.db and taken.db", names)
	}
	if err := fm.Backup(ctx, filepath.Join(dir, "missing", "b.db")); err == nil {
		t.Error("backup into a missing directory succeeded")
	}

	problems, err := fm.IntegrityCheck(ctx)
	if err != nil || len(problems) != 0 {
		t.Errorf("integrity check: %v, %v; want no problems", problems, err)
	}
}

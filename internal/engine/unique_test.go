package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/clock"
	"github.com/flowlite/flowlite/internal/store"
)

// A unique period needs a key; the key's holder is returned whatever the
// options of the later start.
func TestStartUniqueValidation(t *testing.T) {
	t.Parallel()
	e, _, _ := newQueueEngine(t)
	ctx := context.Background()
	for _, p := range []StartParams{
		{Workflow: jobKey, UniquePeriod: time.Minute},
		{Workflow: jobKey, UniqueKey: "k", UniquePeriod: -time.Minute},
	} {
		if _, err := e.StartRun(ctx, p); err == nil {
			t.Errorf("start with %+v succeeded", p)
		}
	}
	first, err := e.StartRun(ctx, StartParams{Workflow: jobKey, Input: []byte(`{}`), UniqueKey: "k", UniquePeriod: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.StartRun(ctx, StartParams{Workflow: jobKey, Input: []byte(`{}`), UniqueKey: "k", Queue: "other", Priority: 9})
	if err != nil || !again.Existing || again.Run.ID != first.Run.ID || again.Run.Queue != "default" {
		t.Errorf("second start: %+v, %v; want the first run, unchanged", again, err)
	}
}

// keyFreedStore is a store whose first insert of each write reports its run
// not inserted although nothing holds the run's ID or key: what a start on
// PostgreSQL sees when the key's holder finishes between its insert (which
// waited for the holder and met it) and the look-up of the holder.
type keyFreedStore struct {
	store.Store
}

func (s keyFreedStore) Write(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Write(ctx, func(tx store.Tx) error { return fn(&keyFreedTx{Tx: tx}) })
}

type keyFreedTx struct {
	store.Tx
	missed bool
}

func (tx *keyFreedTx) RunInsert(ctx context.Context, p store.RunInsertParams) (bool, error) {
	if !tx.missed {
		tx.missed = true
		return false, nil
	}
	return tx.Tx.RunInsert(ctx, p)
}

func (tx *keyFreedTx) RunInsertMany(ctx context.Context, ps []store.RunInsertParams) ([]bool, error) {
	if !tx.missed {
		tx.missed = true
		return make([]bool, len(ps)), nil
	}
	return tx.Tx.RunInsertMany(ctx, ps)
}

// A start whose unique key's holder finished between the insert and the
// look-up inserts again and starts its run, alone and in a batch, under
// either duplicate policy.
func TestStartAfterTheKeyHolderFinishedMeanwhile(t *testing.T) {
	t.Parallel()
	s := openTestStore(t)
	e, err := New(keyFreedStore{s}, Config{Clock: clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(Workflow{Key: jobKey, Run: func(*RunContext, []byte) ([]byte, error) { return nil, nil }}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for i, policy := range []flowtype.DuplicatePolicy{flowtype.ReturnExisting, flowtype.RefuseDuplicate} {
		alone := StartParams{ID: fmt.Sprintf("alone-%d", i), Workflow: jobKey, Input: []byte("1"), UniqueKey: fmt.Sprintf("a%d", i), OnDuplicate: policy}
		st, err := e.StartRun(ctx, alone)
		if err != nil || st.Existing || st.Run.ID != alone.ID {
			t.Fatalf("start under policy %d: run %q, existing %v, %v; want run %s started", policy, st.Run.ID, st.Existing, err, alone.ID)
		}
		batch := alone
		batch.ID, batch.UniqueKey = fmt.Sprintf("batch-%d", i), fmt.Sprintf("b%d", i)
		sts, err := e.StartRuns(ctx, []StartParams{batch})
		if err != nil || sts[0].Existing || sts[0].Run.ID != batch.ID {
			t.Fatalf("batch start under policy %d: %v; want run %s started", policy, err, batch.ID)
		}
		for _, id := range []string{alone.ID, batch.ID} {
			if _, err := s.Reader().RunGet(ctx, id); err != nil {
				t.Errorf("run %s: %v", id, err)
			}
		}
	}
}

package sqlitestore_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// BenchmarkEventAppend measures EventAppend alone: 5,000 events per write
// transaction, on a table that already holds 100,000 events.
func BenchmarkEventAppend(b *testing.B) {
	ctx := b.Context()
	s, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "flowlite.db"), sqlitestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	err = s.Write(ctx, func(tx store.Tx) error {
		for i := range 100 {
			if _, err := tx.RunInsert(ctx, store.RunInsertParams{ID: fmt.Sprint(i), Workflow: flowtype.WorkflowKey{Name: "w", Version: 1}, Queue: "q", Input: []byte(`{}`), RunAt: 1, Now: 1}); err != nil {
				return err
			}
		}
		for i := range 100_000 {
			if err := tx.EventAppend(ctx, store.Event{RunID: fmt.Sprint(i % 100), At: 1, Kind: "step_completed", Step: "s"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		err := s.Write(ctx, func(tx store.Tx) error {
			for i := range 5000 {
				if err := tx.EventAppend(ctx, store.Event{RunID: fmt.Sprint(i % 100), At: 1, Kind: "step_completed", Step: "s"}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*5000), "ns/event")
}

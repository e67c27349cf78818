package engine

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// openTestStore opens a store on a fresh SQLite file that the test closes
// when it ends.
func openTestStore(t *testing.T) store.Store {
	t.Helper()
	s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "engine.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// startTestEngine starts e and stops it, within 10s, when the test ends.
func startTestEngine(t *testing.T, e *Engine) {
	t.Helper()
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
}

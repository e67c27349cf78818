package storetest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// workflowTests are the conformance tests of store.WorkflowReader and
// store.WorkflowTx; Exercise runs them with the others.
func workflowTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Workflows", testWorkflows},
	}
}

func testWorkflows(t *testing.T, s store.Store) {
	list := func() []flowtype.WorkflowKey {
		t.Helper()
		got, err := s.Reader().WorkflowList(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(got, func(a, b flowtype.WorkflowKey) int {
			if c := strings.Compare(a.Name, b.Name); c != 0 {
				return c
			}
			return a.Version - b.Version
		})
		return got
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("empty store lists workflows %v", got)
	}
	register := func(now int64, keys ...flowtype.WorkflowKey) {
		t.Helper()
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			for _, k := range keys {
				if err := tx.WorkflowRegister(ctx, k, now); err != nil {
					return err
				}
			}
			return nil
		})
	}
	register(base, invoice1, order2, order1, order1)
	register(base+10, order1, invoice1)
	want := []flowtype.WorkflowKey{invoice1, order1, order2}
	if got := list(); !slices.Equal(got, want) {
		t.Errorf("workflows %v, want %v", got, want)
	}
}

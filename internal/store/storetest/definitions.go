package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// definitionTests are the conformance tests of store.DefinitionReader and
// store.DefinitionTx; Exercise runs them with the others.
func definitionTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"DefinitionPutAndRead", testDefinitionPutAndRead},
		{"DefinitionFrozenOnceUsed", testDefinitionFrozenOnceUsed},
	}
}

func putDefinition(t *testing.T, s store.Store, d store.Definition, now int64) (flowtype.PutResult, error) {
	t.Helper()
	var res flowtype.PutResult
	var putErr error
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		res, putErr = tx.DefinitionPut(ctx, d, now)
		return nil
	})
	return res, putErr
}

func definition(name string, version int, body string) store.Definition {
	return store.Definition{Name: name, Version: version, Hash: "h-" + body, Body: []byte(body), File: name + ".yaml"}
}

func testDefinitionPutAndRead(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := s.Reader()
	// A missing definition is told apart from a missing run.
	for what, err := range map[string]error{
		"latest of nothing": second(r.DefinitionLatest(ctx, "etl")),
		"get of nothing":    second(r.DefinitionGet(ctx, "etl", 1)),
	} {
		if !errors.Is(err, flowtype.ErrDefinitionNotFound) || errors.Is(err, flowtype.ErrRunNotFound) {
			t.Fatalf("%s: %v, want ErrDefinitionNotFound, not ErrRunNotFound", what, err)
		}
	}
	if _, err := r.RunGet(ctx, "etl"); !errors.Is(err, flowtype.ErrRunNotFound) || errors.Is(err, flowtype.ErrDefinitionNotFound) {
		t.Fatalf("get of an unknown run: %v, want ErrRunNotFound, not ErrDefinitionNotFound", err)
	}
	for _, tc := range []struct {
		d    store.Definition
		now  int64
		want flowtype.PutResult
	}{
		{definition("etl", 1, "one"), base, flowtype.PutCreated},
		{definition("etl", 1, "one"), base + 1, flowtype.PutUnchanged},
		{definition("etl", 2, "two"), base + 2, flowtype.PutCreated},
		{definition("etl", 1, "uno"), base + 3, flowtype.PutReplaced}, // nothing uses it yet
		{definition("abc", 7, "x"), base + 4, flowtype.PutCreated},
	} {
		got, err := putDefinition(t, s, tc.d, tc.now)
		if err != nil || got != tc.want {
			t.Fatalf("put %s v%d %q: %v, %v; want %v", tc.d.Name, tc.d.Version, tc.d.Body, got, err, tc.want)
		}
	}
	d, err := r.DefinitionGet(ctx, "etl", 1)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Body) != "uno" || d.Hash != "h-uno" || d.CreatedAt != base || d.UpdatedAt != base+3 || d.File != "etl.yaml" {
		t.Errorf("etl v1 = %+v", d)
	}
	latest, err := r.DefinitionLatest(ctx, "etl")
	if err != nil || latest.Version != 2 || string(latest.Body) != "two" {
		t.Errorf("latest etl = %+v, %v", latest, err)
	}
	list, err := r.DefinitionList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, d := range list {
		keys = append(keys, d.Name+":"+string(rune('0'+d.Version)))
		if d.Body != nil {
			t.Errorf("list carries the body of %s", d.Name)
		}
		if d.InUse {
			t.Errorf("%s v%d in use with no run and no engine", d.Name, d.Version)
		}
	}
	if want := "abc:7 etl:1 etl:2"; join(keys) != want {
		t.Errorf("list %v, want %s", keys, want)
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

// testDefinitionFrozenOnceUsed: a version with a run, or one an engine
// registered, keeps its document; the same document is still accepted.
func testDefinitionFrozenOnceUsed(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, err := putDefinition(t, s, definition(order1.Name, order1.Version, "a"), base); err != nil {
		t.Fatal(err)
	}
	if _, err := putDefinition(t, s, definition(invoice1.Name, invoice1.Version, "a"), base); err != nil {
		t.Fatal(err)
	}
	insert(t, s, newRun("r1")) // a run of order:1
	do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.WorkflowRegister(ctx, invoice1, base) })
	for _, k := range []flowtype.WorkflowKey{order1, invoice1} {
		_, err := putDefinition(t, s, definition(k.Name, k.Version, "b"), base+1)
		if !errors.Is(err, flowtype.ErrDefinitionFrozen) {
			t.Errorf("replace %s in use: %v, want ErrDefinitionFrozen", k, err)
		}
		d, err := s.Reader().DefinitionGet(ctx, k.Name, k.Version)
		if err != nil || string(d.Body) != "a" || d.UpdatedAt != base {
			t.Errorf("%s after a refused put: %+v, %v", k, d, err)
		}
		if res, err := putDefinition(t, s, definition(k.Name, k.Version, "a"), base+2); err != nil || res != flowtype.PutUnchanged {
			t.Errorf("same document for %s in use: %v, %v", k, res, err)
		}
	}
	list, err := s.Reader().DefinitionList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list {
		if !d.InUse {
			t.Errorf("%s v%d not in use", d.Name, d.Version)
		}
	}
	// A new version of a frozen one is a new row.
	if res, err := putDefinition(t, s, definition(order1.Name, order1.Version+5, "b"), base+3); err != nil || res != flowtype.PutCreated {
		t.Errorf("new version: %v, %v", res, err)
	}
}

// second returns the error of a call that returns a value and an error.
func second[T any](_ T, err error) error { return err }

package flowdef_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
	"github.com/flowlite/flowlite/flow/flowtest"
	"github.com/flowlite/flowlite/flow/flowtype"
)

// TestInstallStoresAndRegisters: a definition the program compiled is
// stored by Install, so that ListDefinitions and GetDefinition (what
// `flowlite def list`, `def show` and the dashboard's DAG read) see it,
// and registered, so that it runs; installing it again changes nothing,
// and a different document under the same version, once in use, is
// refused before anything is registered. It runs on the backend
// FLOWLITE_TEST_BACKEND names (issue 22, item 5).
func TestInstallStoresAndRegisters(t *testing.T) {
	t.Parallel()
	w := load(t, defaultsDef, testCatalog(t, &recorder{}))
	env := flowtest.New(t, nil)
	ctx := t.Context()
	if err := flowdef.Install(ctx, env.Engine, w); err != nil {
		t.Fatal(err)
	}
	list, err := env.Engine.ListDefinitions(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "defaults" || list[0].Version != 1 || list[0].Hash != w.Hash() {
		t.Fatalf("stored %+v, %v", list, err)
	}
	got, err := env.Engine.GetDefinition(ctx, "defaults", 1)
	if err != nil || !bytes.Equal(got.Body, w.Definition().Source) || got.File != "TestInstallStoresAndRegisters.yaml" {
		t.Fatalf("GetDefinition = %+v, %v", got, err)
	}
	run, err := flowdef.Start(ctx, env.Engine, w, flowdef.Values{"n": 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := flowtest.Await(env, run); err != nil || out["n"] != 1 {
		t.Fatalf("run: %v, %v", out, err)
	}

	// The stored document is the one Install stored: the same again is
	// unchanged.
	if _, res, err := flowdef.Apply(ctx, env.Engine, "again.yaml", []byte(defaultsDef), nil); err != nil || res != flowtype.PutUnchanged {
		t.Fatalf("apply the same document: %q, %v", res, err)
	}
	other, err := flowdef.Load("other.yaml", []byte(strings.Replace(defaultsDef, "default: 5", "default: 6", 1)), testCatalog(t, &recorder{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := flowdef.Install(ctx, env.Engine, other); !errors.Is(err, flow.ErrDefinitionFrozen) {
		t.Fatalf("installing a changed document of a version in use: err = %v, want ErrDefinitionFrozen", err)
	}
	if list, err := env.Engine.ListDefinitions(ctx); err != nil || len(list) != 1 || list[0].Hash != w.Hash() {
		t.Fatalf("after the refused install: %+v, %v", list, err)
	}
}

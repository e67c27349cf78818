package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
)

// TestDefCommands goes through validate, apply, list, show and graph.
func TestDefCommands(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	etl := "testdata/def/etl.yaml"

	if out := ok(t, path, "def", "validate", etl); out != etl+": valid\n" {
		t.Errorf("validate: %q", out)
	}
	r := fails(t, exitError, "1 of 2 definition(s) invalid", "def", "validate", etl, "testdata/def/bad.json")
	for _, want := range []string{"testdata/def/bad.json:2:3: cycle: a needs b needs a", "testdata/def/bad.json:3:58: step b: with.v: unknown variable vars.missing"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("validate stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	// apply checks types, so it needs the program's catalog.
	fails(t, exitUsage, "needs --catalog", "--db", path, "def", "apply", etl)
	cat := etlManifest(t)
	// Nothing is stored unless every file is valid.
	fails(t, exitError, "invalid", "--db", path, "def", "apply", "--catalog", cat, etl, "testdata/def/bad.json")
	if out := ok(t, path, "def", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("list after a refused apply: %s", out)
	}

	if out := ok(t, path, "def", "apply", "--catalog", cat, etl); out != "etl version 1: created ("+etl+")\n" {
		t.Errorf("apply: %q", out)
	}
	if out := ok(t, path, "def", "apply", "--catalog", cat, etl); !strings.Contains(out, "unchanged") {
		t.Errorf("apply again: %q", out)
	}
	src, err := os.ReadFile(etl)
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(t.TempDir(), "etl.yaml")
	if err := os.WriteFile(changed, append(src, []byte("description: changed\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := ok(t, path, "def", "apply", "--catalog", cat, changed); !strings.Contains(out, "replaced") {
		t.Errorf("apply of a change to an unused version: %q", out)
	}
	list := decode[[]defJSON](t, ok(t, path, "def", "list", "--json"))
	if len(list) != 1 || list[0].Name != "etl" || list[0].Version != 1 || list[0].InUse || len(list[0].Hash) != 64 {
		t.Errorf("list: %+v", list)
	}
	if out := ok(t, path, "def", "show", "etl"); !strings.HasSuffix(out, "description: changed\n") {
		t.Errorf("show: %q", out)
	}
	fails(t, exitError, `no definition "etl" version 2`, "--db", path, "def", "show", "etl", "2")
	fails(t, exitUsage, "invalid version", "--db", path, "def", "show", "etl", "x")

	if out := ok(t, path, "def", "graph", "etl"); !strings.Contains(out, `"extract" -> "load";`) {
		t.Errorf("graph dot: %s", out)
	}
	if out := ok(t, path, "def", "graph", "--format", "mermaid", "--file", etl); !strings.Contains(out, "extract --> load") {
		t.Errorf("graph mermaid: %s", out)
	}
	if out := ok(t, path, "def", "graph", "--format", "svg", "etl", "1"); !strings.HasPrefix(out, "<svg") || !strings.Contains(out, `data-id="load"`) {
		t.Errorf("graph svg: %s", out)
	}
	fails(t, exitUsage, "invalid --format", "--db", path, "def", "graph", "--format", "png", "etl")
}

// etlManifest writes the catalog manifest of a program whose steps match
// testdata/def/etl.yaml, and returns its path.
func etlManifest(t *testing.T) string {
	t.Helper()
	type extractIn struct {
		Source string `json:"source"`
	}
	type extractOut struct {
		Rows []string `json:"rows"`
	}
	type loadIn struct {
		Rows []string `json:"rows"`
	}
	cat := flowdef.NewCatalog()
	if err := errors.Join(
		flowdef.AddStep(cat, flow.Step[extractIn, extractOut]{Name: "extract"}),
		flowdef.AddStep(cat, flow.Step[loadIn, int]{Name: "load"}),
	); err != nil {
		t.Fatal(err)
	}
	m, err := cat.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, m, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDefCatalog: with a program's catalog manifest, validate checks the
// steps and their types as the program would.
func TestDefCatalog(t *testing.T) {
	t.Parallel()
	type extractIn struct {
		Source string `json:"source"`
	}
	type extractOut struct {
		Rows []string `json:"rows"`
	}
	type loadIn struct {
		Rows int `json:"rows"`
	}
	cat := flowdef.NewCatalog()
	if err := errors.Join(
		flowdef.AddStep(cat, flow.Step[extractIn, extractOut]{Name: "extract"}),
		flowdef.AddStep(cat, flow.Step[loadIn, string]{Name: "load"}),
	); err != nil {
		t.Fatal(err)
	}
	m, err := cat.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(manifest, m, 0o644); err != nil {
		t.Fatal(err)
	}
	r := fails(t, exitError, "invalid", "def", "validate", "--catalog", manifest, "testdata/def/etl.yaml")
	if !strings.Contains(r.stderr, "testdata/def/etl.yaml:12:18: step load: with.rows: type mismatch: list of string where int is expected") {
		t.Errorf("stderr: %s", r.stderr)
	}
	fails(t, exitUsage, "--catalog", "def", "validate", "--catalog", filepath.Join(t.TempDir(), "none.json"), "testdata/def/etl.yaml")
	// apply refuses the mismatch too: nothing reaches the database.
	path := fixtureDB(t)
	fails(t, exitError, "type mismatch", "--db", path, "def", "apply", "--catalog", manifest, "testdata/def/etl.yaml")
	if out := ok(t, path, "def", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("list after a refused apply: %s", out)
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
)

type PostTotalInput struct {
	Batch string `json:"batch"`
}

type PostTotalOutput struct {
	Amount int    `json:"amount"`
	Entry  string `json:"entry"`
}

// TestDefValidateNamesTheGoType: with a manifest, a field the definition
// names that a step's type lacks is reported with the step and the Go
// type's name, as flowdefgen reports it, never the struct the expression
// checker builds (issue 22, item 6).
func TestDefValidateNamesTheGoType(t *testing.T) {
	t.Parallel()
	cat := flowdef.NewCatalog()
	if err := flowdef.AddStep(cat, flow.Step[PostTotalInput, PostTotalOutput]{Name: "post_total"}); err != nil {
		t.Fatal(err)
	}
	m, err := cat.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	manifest := filepath.Join(dir, "catalog.json")
	def := filepath.Join(dir, "billing.yaml")
	const src = `name: billing
version: 1
steps:
  - id: post
    uses: post_total
    with: {btch: '"b1"'}
outputs:
  cents: steps.post.output.cents
`
	if err := os.WriteFile(manifest, m, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(def, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r := fails(t, exitError, "invalid", "def", "validate", "--catalog", manifest, def)
	for _, want := range []string{
		`step post: with.btch: the Go type PostTotalInput (the input of step post_total) has no field named "btch" in JSON (it has batch)`,
		`outputs.cents: the Go type PostTotalOutput (the output of step post_total) has no field named "cents" in JSON (it has amount, entry)`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "struct {") {
		t.Errorf("stderr names a made-up type:\n%s", r.stderr)
	}
}

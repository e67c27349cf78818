package flowdef_test

import (
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
)

type OpenBatchInput struct {
	Batch string `json:"batch"`
}

type OpenBatchOutput struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

// TestMessagesNameTheStepAndGoType: a field a definition names that a
// step's type lacks is reported with the Go type's name and the step,
// never the made-up struct expressions see, both with the program's
// catalog and with its manifest (what def validate --catalog reads)
// (issue 22, item 6).
func TestMessagesNameTheStepAndGoType(t *testing.T) {
	t.Parallel()
	cat := flowdef.NewCatalog()
	if err := flowdef.AddStep(cat, flow.Step[OpenBatchInput, OpenBatchOutput]{Name: "open_batch"}); err != nil {
		t.Fatal(err)
	}
	manifest, err := cat.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	fromManifest, err := flowdef.CatalogFromManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	const src = `name: billing
version: 1
inputs: {batch: {type: string}}
steps:
  - id: open
    uses: open_batch
    with: {btch: input.batch}
  - id: again
    uses: open_batch
    needs: [open]
    if: steps.open.output.cent > 1
    with: {batch: steps.open.output.id}
outputs:
  id: steps.open.output.idd
`
	for name, c := range map[string]*flowdef.Catalog{"catalog": cat, "manifest": fromManifest} {
		_, err := flowdef.Load("billing.yaml", []byte(src), c)
		if err == nil {
			t.Fatalf("%s: the typos were accepted", name)
		}
		msg := err.Error()
		for _, want := range []string{
			`billing.yaml:7:18: step open: with.btch: the Go type OpenBatchInput (the input of step open_batch) has no field named "btch" in JSON (it has batch)`,
			`billing.yaml:11:9: step again: if: the Go type OpenBatchOutput (the output of step open_batch) has no field named "cent" in JSON (it has cents, id)`,
			`outputs.id: the Go type OpenBatchOutput (the output of step open_batch) has no field named "idd" in JSON (it has cents, id)`,
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: the message lacks\n%s\nin\n%s", name, want, msg)
			}
		}
		if strings.Contains(msg, "struct {") || strings.Contains(msg, "F0") {
			t.Errorf("%s: the message names a made-up type:\n%s", name, msg)
		}
	}
}

package flowdef_test

import (
	"testing"

	"github.com/flowlite/flowlite/flow/flowdef"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// TestOutputsKeepTheirTypes: an int output is an int in the output map
// of a run started with flowdef.Start (and awaited with flowtest.Await),
// not the float64 that decoding JSON makes of it; a number stays a
// float64 even when integral, and an undeclared output whose expression
// is an int is an int too (issue 22, item 4).
func TestOutputsKeepTheirTypes(t *testing.T) {
	t.Parallel()
	w := load(t, `
name: typed
version: 1
inputs:
  cents: {type: int}
steps:
  - {id: e, uses: echo, input: '"x"'}
outputs:
  cents: {value: input.cents, type: int}
  euros: {value: 'input.cents / 100', type: number}
  double: input.cents * 2
  word: steps.e.output
`, testCatalog(t, &recorder{}))
	env := flowtest.New(t, nil)
	flowtest.Register(env, w.Flow())
	run, err := flowdef.Start(t.Context(), env.Engine, w, flowdef.Values{"cents": 300}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := flowtest.Await(env, run)
	if err != nil {
		t.Fatal(err)
	}
	check := func(out flowdef.Values) {
		t.Helper()
		if out["cents"] != 300 || out["euros"] != 3.0 || out["double"] != 600 || out["word"] != "x" {
			t.Errorf("outputs %#v, want cents 300, euros 3.0, double 600, word x", out)
		}
	}
	check(out)
	// A run awaited as a plain flow.Run has JSON's numbers; Output types them.
	plain, _, err := flowtest.RunWorkflow(env, w.Flow(), flowdef.Values{"cents": 300})
	if err != nil {
		t.Fatal(err)
	}
	typed, err := w.Output(plain)
	if err != nil {
		t.Fatal(err)
	}
	check(typed)
}

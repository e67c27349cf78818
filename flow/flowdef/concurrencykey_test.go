package flowdef_test

import (
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
	"github.com/flowlite/flowlite/flow/flowtest"
)

const keyedDef = `
name: keyed
version: 1
concurrencyKey: '"customer-" + input.customer'
inputs:
  customer: {type: string}
steps:
  - id: e
    uses: echo
    input: input.customer
`

// A definition's concurrencyKey gives every run started through flowdef
// the key its expression derives from the input (so a queue's per-key
// limits and fair claims apply to definition runs, issue 21); a key in the
// start's options wins.
func TestDefinitionConcurrencyKey(t *testing.T) {
	t.Parallel()
	w := load(t, keyedDef, testCatalog(t, &recorder{}))
	env := flowtest.New(t, nil)
	ctx := t.Context()
	if err := flowdef.Register(env.Engine, w); err != nil {
		t.Fatal(err)
	}
	derived, err := flowdef.Start(ctx, env.Engine, w, flowdef.Values{"customer": "acme"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	explicit, err := flowdef.Start(ctx, env.Engine, w, flowdef.Values{"customer": "acme"}, &flow.StartOptions{ConcurrencyKey: "vip"})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{derived.ID(): "customer-acme", explicit.ID(): "vip"} {
		if got := env.Inspect(id).ConcurrencyKey; got != want {
			t.Errorf("run %s has concurrency key %q, want %q", id, got, want)
		}
	}
}

// A concurrencyKey that is not a string, or that reads more than the
// input, is refused when the definition loads, naming what is wrong.
func TestDefinitionConcurrencyKeyInvalid(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ key, want string }{
		{`len(input.customer)`, "concurrencyKey must be a string"},
		{`steps.e.output`, "concurrencyKey"},
		{`input.nobody`, "unknown input input.nobody"},
	} {
		src := strings.Replace(keyedDef, `'"customer-" + input.customer'`, "'"+c.key+"'", 1)
		_, err := flowdef.Load("keyed.yaml", []byte(src), testCatalog(t, &recorder{}))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("concurrencyKey %s: %v, want an error with %q", c.key, err, c.want)
		}
	}
}

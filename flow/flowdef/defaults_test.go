package flowdef_test

import (
	"fmt"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
	"github.com/flowlite/flowlite/flow/flowtest"
)

const defaultsDef = `
name: defaults
version: 1
inputs:
  notify: {type: bool, default: true}
  n: {type: int, default: 5}
  s: {type: string, default: "x"}
steps:
  - id: e
    uses: echo
    if: input.notify
    input: 'input.s + string(input.n)'
outputs:
  notified: {value: not steps.e.skipped, type: bool}
  n: {value: input.n, type: int}
  s: {value: input.s, type: string}
`

// TestSetInputWinsOverDefault: an input the caller set wins over its
// default even when it is a zero value (false, 0, ""); an absent key, or
// null, takes the default (issue 22, item 1).
func TestSetInputWinsOverDefault(t *testing.T) {
	t.Parallel()
	w := load(t, defaultsDef, testCatalog(t, &recorder{}))
	env := flowtest.New(t, nil)
	for i, c := range []struct {
		in   flowdef.Values
		want string
	}{
		{flowdef.Values{}, "map[n:5 notified:true s:x]"},
		{flowdef.Values{"notify": false, "n": 0, "s": ""}, "map[n:0 notified:false s:]"},
		{flowdef.Values{"notify": nil, "n": nil, "s": nil}, "map[n:5 notified:true s:x]"},
		{flowdef.Values{"notify": true, "n": 7}, "map[n:7 notified:true s:x]"},
	} {
		run := flowtest.Start(env, w.Flow(), c.in, &flow.StartOptions{RunID: fmt.Sprint("defaults-", i)})
		out, err := flowtest.Await(env, run)
		if err != nil {
			t.Fatalf("input %v: %v", c.in, err)
		}
		if got := fmt.Sprint(out); got != c.want {
			t.Errorf("input %v: output %s, want %s", c.in, got, c.want)
		}
	}
}

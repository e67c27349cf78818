package dashboard

import (
	"regexp"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow/flowdef"
)

// The run page's DAG shows every node's label and state whole: a long
// step with forEach and its state used to read "price_line ×each ·
// comple…" (issue 22).
func TestDAGLabelsAreNotCut(t *testing.T) {
	t.Parallel()
	d, err := flowdef.Parse("order.yaml", []byte(`
name: place_order
version: 1
steps:
  - id: open_batch_for_the_customer
    uses: work
    input: '"x"'
  - id: price_lines
    uses: price_line
    needs: open_batch_for_the_customer
    forEach: '["a", "b"]'
    input: item
`))
	if err != nil {
		t.Fatal(err)
	}
	svg := flowdef.SVG(d, flowdef.States{"price_lines": "compensating", "open_batch_for_the_customer": "completed"})
	if strings.Contains(svg, "…") {
		t.Errorf("a DAG label is cut:\n%s", svg)
	}
	for _, want := range []string{">price_line ×each</text>", ">compensating</text>", ">open_batch_for_the_customer</text>", "<title>price_lines\nprice_line ×each\ncompensating</title>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("DAG lacks %q:\n%s", want, svg)
		}
	}
	// Every box is wide enough for its longest line.
	m := regexp.MustCompile(`<rect x="\d+" y="\d+" width="(\d+)"`).FindStringSubmatch(svg)
	if m == nil || len(m[1]) < 3 || m[1] < "200" {
		t.Errorf("box width %v, want room for open_batch_for_the_customer (27 characters)", m)
	}
}

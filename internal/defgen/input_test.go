package defgen_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow/flowdef"
	"github.com/flowlite/flowlite/internal/defgen"
)

// TestInputPassesZeroValues: the generated input type encodes every
// field (no omitempty), so a false, 0 or "" the caller set is not
// replaced by the default, and New<Name>Input returns the defaults, each
// as a Go value of the declared type (issue 22, item 1).
func TestInputPassesZeroValues(t *testing.T) {
	t.Parallel()
	const def = `name: billing
version: 1
inputs:
  notify: {type: bool, default: true}
  retries: {type: int, default: 3}
  note: {type: string, default: "hi"}
  rate: {type: number, default: 2}
  tags: {type: list, default: [a, 1]}
  extra: {type: object, default: {k: true}}
  customer: {type: string}
steps:
  - {id: wait, sleep: 1s}
`
	d, err := flowdef.Validate("billing.yaml", []byte(def), nil)
	if err != nil {
		t.Fatal(err)
	}
	files, err := defgen.Generate(d, defgen.Options{Package: "p", File: "billing.yaml", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(files.Code, []byte("omitempty")) {
		t.Errorf("the generated input leaves out zero values:\n%s", files.Code)
	}
	for _, want := range []string{
		"Notify bool `json:\"notify\"`",
		"func NewBillingInput() BillingInput {\n\treturn BillingInput{\n" +
			"\t\tNotify:  true,\n" +
			"\t\tRetries: 3,\n" +
			"\t\tNote:    \"hi\",\n" +
			"\t\tRate:    float64(2),\n" +
			"\t\tTags:    []any{\"a\", float64(1)},\n" +
			"\t\tExtra:   map[string]any{\"k\": true},\n" +
			"\t}\n}",
	} {
		if !strings.Contains(string(files.Code), want) {
			t.Errorf("the generated code lacks\n%s\nin\n%s", want, files.Code)
		}
	}
}

package flowdef_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow/flowdef"
)

// TestSchemaListsTheKeysParseKnows keeps schema.json and the parser in step:
// every key the schema lists is accepted by Parse, and a key it does not
// list is refused.
func TestSchemaListsTheKeysParseKnows(t *testing.T) {
	t.Parallel()
	var s struct {
		Properties map[string]any `json:"properties"`
		Defs       struct {
			Step struct {
				Properties map[string]any `json:"properties"`
			} `json:"step"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(flowdef.Schema(), &s); err != nil {
		t.Fatalf("schema.json is not JSON: %v", err)
	}
	if len(s.Properties) < 5 || len(s.Defs.Step.Properties) < 10 {
		t.Fatalf("schema lists %d top-level and %d step keys", len(s.Properties), len(s.Defs.Step.Properties))
	}
	samples := map[string]string{
		"uses": `"echo"`, "sleep": `"1s"`, "receive": `{"signal": "go"}`, "call": `"child"`,
		"needs": `[]`, "if": `"true"`, "forEach": `"[1]"`, "parallelism": `2`, "let": `{}`,
		"with": `{}`, "input": `"1"`, "retry": `{}`, "timeout": `"1s"`, "compensate": `"x"`,
		"set": `{}`, "description": `"d"`, "id": `"a"`,
	}
	for key := range s.Defs.Step.Properties {
		sample, ok := samples[key]
		if !ok {
			t.Errorf("schema step key %q has no sample in this test", key)
			continue
		}
		kind := `"uses": "echo", `
		if slices.Contains([]string{"uses", "sleep", "receive", "call"}, key) {
			kind = ""
		}
		src := `{"name": "n", "version": 1, "steps": [{` + kind + `"id": "a", "` + key + `": ` + sample + `}]}`
		if key == "id" {
			src = `{"name": "n", "version": 1, "steps": [{"id": "a", "uses": "echo"}]}`
		}
		if _, err := flowdef.Parse("k.json", []byte(src)); err != nil && strings.Contains(err.Error(), "unknown key") {
			t.Errorf("Parse refuses step key %q from the schema: %v", key, err)
		}
	}
	for key := range s.Properties {
		if _, err := flowdef.Parse("k.json", []byte(`{"name": "n", "version": 1, "steps": [{"id": "a", "uses": "echo"}], "`+key+`": {}}`)); err != nil && strings.Contains(err.Error(), "unknown key") {
			t.Errorf("Parse refuses top-level key %q from the schema: %v", key, err)
		}
	}
	if _, err := flowdef.Parse("k.json", []byte(`{"name": "n", "version": 1, "steps": [{"id": "a", "uses": "echo", "colour": 1}]}`)); err == nil {
		t.Error("Parse accepts a key the schema does not list")
	}
}

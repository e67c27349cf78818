package flowdef

import _ "embed"

// schema is the JSON Schema of the definition format, for editors and
// other tools; Parse enforces the same rules with positions.
//
//go:embed schema.json
var schema []byte

// Schema returns the JSON Schema (draft 2020-12) of the definition format.
func Schema() []byte { return append([]byte(nil), schema...) }

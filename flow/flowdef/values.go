package flowdef

import (
	"encoding/json"
	"fmt"
)

// ToValues turns a typed input (a struct with JSON tags, such as the one
// flowdefgen generates) into the Values a defined workflow takes.
func ToValues(v any) (Values, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	var out Values
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%T is not a JSON object: %w", v, err)
	}
	return out, nil
}

// FromValues decodes a defined workflow's output into a T, refusing fields
// T does not have.
func FromValues[T any](v Values) (T, error) {
	b, err := json.Marshal(v)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("encode output: %w", err)
	}
	out, err := decodeStrict[T](b)
	if err != nil {
		return out, fmt.Errorf("decode output into %T: %w", out, err)
	}
	return out, nil
}

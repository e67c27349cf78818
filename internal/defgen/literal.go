package defgen

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// goLiteral writes a default value, as flowdef holds it (a string, int,
// bool, float64, or JSON data of []any and map[string]any), as a Go
// expression of the same value and dynamic type. Numbers from JSON are
// float64 even inside []any and any, so they are written float64(x).
func goLiteral(v any) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case string:
		return strconv.Quote(v)
	case bool:
		return strconv.FormatBool(v)
	case int:
		return strconv.Itoa(v)
	case float64:
		return "float64(" + strconv.FormatFloat(v, 'g', -1, 64) + ")"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = goLiteral(e)
		}
		return "[]any{" + strings.Join(parts, ", ") + "}"
	case map[string]any:
		parts := make([]string, 0, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			parts = append(parts, strconv.Quote(k)+": "+goLiteral(v[k]))
		}
		return "map[string]any{" + strings.Join(parts, ", ") + "}"
	}
	// flowdef converts defaults to the types above; anything else is a
	// change there that this function must learn.
	return fmt.Sprintf("%#v", v)
}

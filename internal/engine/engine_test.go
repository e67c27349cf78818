package engine

import (
	"slices"
	"strings"
	"testing"
)

// Run IDs are 23 characters of lowercase base32 without the letters that
// read like digits, distinct, and sort by creation time.
func TestNewRunID(t *testing.T) {
	t.Parallel()
	const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
	seen := map[string]bool{}
	var ids []string
	for range 1000 {
		id := NewRunID()
		if len(id) != 23 || strings.Trim(id, alphabet) != "" {
			t.Fatalf("run ID %q: want 23 characters of %s", id, alphabet)
		}
		if seen[id] {
			t.Fatalf("run ID %q given twice", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	// The first 9 characters (45 of the 48 time bits) never go back.
	for i := 1; i < len(ids); i++ {
		if ids[i][:9] < ids[i-1][:9] {
			t.Fatalf("run ID %s made after %s sorts before it", ids[i], ids[i-1])
		}
	}
	if !slices.IsSortedFunc(ids, func(a, b string) int { return strings.Compare(a[:9], b[:9]) }) {
		t.Error("run IDs do not sort by creation time")
	}
}

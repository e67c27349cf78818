package engine

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// FuzzCheckName checks the name validator against the rules written
// independently: a name is accepted exactly when it is valid UTF-8, 1 to
// flowtype.MaxNameBytes bytes, not only white space, and free of control and
// line-break characters; a refusal is a *NameError matching
// flowtype.ErrInvalidName whose message quotes the name (or its start, when
// very long).
func FuzzCheckName(f *testing.F) {
	for _, seed := range []string{
		"orders", "", " ", "\t\n", "a\nb", "nul\x00", "\xff", "été", "sep\u2028", "nbsp\u00a0only",
		"\u00a0\u2003", "del\x7f", "c1\u0085", strings.Repeat("n", flowtype.MaxNameBytes), strings.Repeat("é", 101),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := CheckName("queue", name)
		want := utf8.ValidString(name) && name != "" && len(name) <= flowtype.MaxNameBytes &&
			strings.TrimFunc(name, unicode.IsSpace) != "" &&
			!strings.ContainsFunc(name, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' })
		if (err == nil) != want {
			t.Fatalf("CheckName(%q) = %v, want accepted = %v", name, err, want)
		}
		if err == nil {
			return
		}
		var ne *flowtype.NameError
		if !errors.As(err, &ne) || !errors.Is(err, flowtype.ErrInvalidName) || ne.Name != name || ne.Kind != "queue" || ne.Rule == "" {
			t.Fatalf("CheckName(%q) = %#v, want a *NameError for it", name, err)
		}
		quoted := strconv.Quote(name)
		if len(name) > 2*flowtype.MaxNameBytes {
			quoted = strconv.Quote(name[:40])
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "invalid queue name "+quoted) || !strings.HasSuffix(msg, ne.Rule) || !utf8.ValidString(msg) {
			t.Fatalf("CheckName(%q): message %q does not quote the name and state the rule", name, msg)
		}
	})
}

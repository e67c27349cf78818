package engine

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// CheckName returns a *NameError when name, naming a kind of thing
// ("workflow", "queue"…), breaks a naming rule: it must be valid UTF-8, 1 to
// flowtype.MaxNameBytes bytes long, not only white space, and free of
// control characters. Names are persisted in every row that refers to them
// and printed one per line by the CLI, so a newline, a NUL or a name of
// spaces would make them ambiguous or invisible there, and a name of
// kilobytes would bloat every row and index that holds it.
func CheckName(kind, name string) error {
	rule := nameRule(name)
	if rule == "" {
		return nil
	}
	return &flowtype.NameError{Kind: kind, Name: name, Rule: rule}
}

// CheckKey returns a *NameError when s, a run ID or a key (a unique,
// concurrency or debounce key) of the kind given ("run ID", "unique key"…),
// breaks the rules of names (see CheckName) for the same reasons: IDs and
// keys are stored, indexed and printed one per line as names are. Only
// the length limit differs, flowtype.MaxKeyBytes, as IDs and keys are
// often composed of several names or values (a child's default ID extends
// its parent's).
func CheckKey(kind, s string) error {
	if rule := ruleOf(s, flowtype.MaxKeyBytes); rule != "" {
		return &flowtype.NameError{Kind: kind, Name: s, Rule: rule}
	}
	return nil
}

// nameRule returns the first rule name breaks, or "".
func nameRule(name string) string { return ruleOf(name, flowtype.MaxNameBytes) }

// ruleOf returns the first rule s breaks as a name at most limit bytes
// long, or "".
func ruleOf(name string, limit int) string {
	switch {
	case name == "":
		return "is empty"
	case len(name) > limit:
		return fmt.Sprintf("is %d bytes long, over the limit of %d", len(name), limit)
	case !utf8.ValidString(name):
		return "is not valid UTF-8"
	case strings.TrimFunc(name, unicode.IsSpace) == "":
		return "is only white space"
	}
	for i, r := range name {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return fmt.Sprintf("contains the control or line-break character %U at byte %d", r, i)
		}
	}
	return ""
}

// DefaultMaxPayloadBytes is the default limit on a stored value's encoded
// size (Config.MaxPayloadBytes).
const DefaultMaxPayloadBytes = 4 << 20

// CheckPayload returns an error matching flowtype.ErrPayloadTooLarge when
// the encoded value b, described by what (e.g. "input of run r1"), is over
// the engine's limit. The check runs before anything is written: one write
// of a hundred megabytes holds SQLite's single writer for seconds, and every
// replay reads the value again.
func (e *Engine) CheckPayload(what string, b []byte) error {
	limit := e.cfg.MaxPayloadBytes
	if limit < 0 || int64(len(b)) <= limit {
		return nil
	}
	return fmt.Errorf("%s is %d bytes, over the limit of %d bytes (Config.MaxPayloadBytes): %w", what, len(b), limit, flowtype.ErrPayloadTooLarge)
}

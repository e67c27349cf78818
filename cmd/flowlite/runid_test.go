package main

import (
	"strings"
	"testing"
)

// A run ID argument that breaks the rules of run IDs (as Start checks
// them) is a usage error with the NameError's words, on every command that
// takes one; before, "history $'a\nb'" said "run a", a line break and
// "b: not found".
func TestRunIDArgumentsFollowTheRulesOfNames(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	for _, args := range [][]string{
		{"history", "a\nb"},
		{"show", "a\nb"},
		{"cancel", "a\nb"},
		{"signal", "a\nb", "go"},
		{"dead", "purge", "a\nb"},
	} {
		r := fails(t, exitUsage, `invalid run ID "a\nb": contains the control or line-break character U+000A at byte 1`, append([]string{"--db", path}, args...)...)
		if strings.Count(r.stderr, "\n") != 2 { // the error and the usage hint
			t.Errorf("flowlite %s: stderr %q is not two lines", args[0], r.stderr)
		}
	}
	fails(t, exitUsage, "is 1025 bytes long, over the limit of 1024", "--db", path, "show", strings.Repeat("r", 1025))
	fails(t, exitUsage, "empty run ID", "--db", path, "signal", "", "go")
}

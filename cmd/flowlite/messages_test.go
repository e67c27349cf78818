package main

import (
	"strings"
	"testing"
)

// An error about a finished run names it once: before, it read "signal x
// to run done-1: run already finished: run done-1 is completed".
func TestFinishedRunErrorsNameTheRunOnce(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	for _, c := range []struct {
		args []string
		id   string
		want string
	}{
		{[]string{"signal", doneRun, "x"}, doneRun, "signal x to run " + doneRun + ": run already finished: run is completed"},
		{[]string{"cancel", doneRun}, doneRun, "cancel run " + doneRun + ": run already finished: run is completed"},
		{[]string{"cancel", sagaRun}, sagaRun, "cancel run " + sagaRun + ": run already finished: run is failed"},
	} {
		r := fails(t, exitError, c.want, append([]string{"--db", path}, c.args...)...)
		if n := strings.Count(r.stderr, c.id); n != 1 {
			t.Errorf("flowlite %s: %q names the run %d times", strings.Join(c.args, " "), r.stderr, n)
		}
	}
}

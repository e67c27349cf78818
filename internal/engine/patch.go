package engine

import (
	"context"
	"database/sql"
)

// Patches (Temporal's GetVersion): one workflow body that branches the runs
// recorded before a change down the recorded path, and every other run down
// the new one, without a new Version.
//
// A patch is decided once per branch scope of a run, at its first call:
//
//   - the history has the patch's marker at this position: the run took the
//     patched path when it first got here, and does again (true);
//   - the history has another call at this position: the run got here
//     before the patch existed, and stays on the old path (false), for the
//     rest of the run, recording nothing;
//   - the history ends before this position: the run gets here for the
//     first time; the marker is recorded as a call (a step named
//     patchPrefix+id, like flow.now's, so it is in the history, the change
//     feed, time travel and exported histories) and the run takes the new
//     path (true). A replay of a finished history (Replay) takes the old
//     path instead: the recorded body made no call there.
//
// The marker is a call like any other, so the non-determinism checks of
// history.go hold for it: a body that no longer calls Patched where the
// history has its marker meets the marker where it makes another call, and
// the run is suspended with a *NonDeterminismError. DeprecatePatch retires
// a patch: it accepts the marker where the history has it and records
// nothing where it has not.

// patchPrefix begins the name of a patch marker's record.
const patchPrefix = "flow.patch:"

// patchOutput is the recorded output of a patch marker.
var patchOutput = []byte("true")

// Patched reports whether the run takes the path of patch id; see above.
// An id that breaks the naming rules suspends the run (a
// *DefinitionError, fixed by a deploy). When recording the marker fails
// the execution stops, as a step's would, and Patched returns false: the
// body's next call returns the reason.
func (rc *RunContext) Patched(id string) bool {
	name, ok := rc.patchName(id)
	if !ok {
		return false
	}
	st := rc.st
	st.mu.Lock()
	if decided, ok := st.patches[rc.scope+name]; ok {
		st.mu.Unlock()
		return decided
	}
	rec, replaying := st.history.byPosition[callPosition{rc.scope, rc.calls}]
	old := false
	switch {
	case replaying:
		old = rec.Name != rc.scope+name
	case st.history.unpositioned:
		// Recorded before calls had positions, so before any patch.
		old = true
	case st.replayOnly && st.finished:
		old = true
	}
	if old {
		st.patches[rc.scope+name] = false
		st.mu.Unlock()
		return false
	}
	st.mu.Unlock()
	if _, err := rc.Step(rc.patchMarker(name)); err != nil {
		return false
	}
	st.mu.Lock()
	st.patches[rc.scope+name] = true
	st.mu.Unlock()
	return true
}

// DeprecatePatch retires patch id from a body that only keeps its new
// path: where the history has the marker it is replayed (so the call
// positions after it still match), and where it has none nothing is
// recorded.
func (rc *RunContext) DeprecatePatch(id string) {
	name, ok := rc.patchName(id)
	if !ok {
		return
	}
	st := rc.st
	st.mu.Lock()
	rec, replaying := st.history.byPosition[callPosition{rc.scope, rc.calls}]
	marked := replaying && rec.Name == rc.scope+name
	st.mu.Unlock()
	if marked {
		_, _ = rc.Step(rc.patchMarker(name)) // a recorded call: it replays, or the execution stops
	}
}

// patchName returns the record name of patch id, or stops the execution
// when id breaks the naming rules.
func (rc *RunContext) patchName(id string) (string, bool) {
	if err := CheckName("patch", id); err != nil {
		_ = rc.Abort(&DefinitionError{RunID: rc.RunID(), Problem: err.Error()})
		return "", false
	}
	return patchPrefix + id, true
}

// patchMarker is the step that records the marker named name.
func (rc *RunContext) patchMarker(name string) Step {
	return Step{
		Name:  name,
		Input: []byte("{}"),
		Retry: rc.DefaultRetry(),
		Run:   func(context.Context, *sql.Tx) ([]byte, error) { return patchOutput, nil },
	}
}

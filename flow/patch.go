package flow

// Patched reports whether this run takes the new path of the change named
// id, so that one workflow body can carry a change of its calls without a
// new Version: runs that reached this point before the change stay on the
// recorded (old) path, every other run takes the new one.
//
//	if flow.Patched(wc, "charge-v2") {
//		_, err = flow.Do(wc, chargeV2, order)
//	} else {
//		_, err = flow.Do(wc, charge, order)
//	}
//
// The first call of a run (of a parallel branch) decides, and later calls
// of id return the same answer:
//
//   - where the run's history has the patch's marker, true;
//   - where the history has another call, false: the run got here before
//     the change was deployed, and it records nothing;
//   - where the history ends, the run gets here for the first time: the
//     marker is recorded, as a call named "flow.patch:" + id, and Patched
//     returns true. The marker is part of the run's history like a step's
//     record: Inspect, History, the change feed, time travel, exported
//     histories and flowlite show list it.
//
// The marker is checked as calls are: a body that no longer calls Patched
// where a run's history has its marker is a *NonDeterminismError, and the
// run is suspended. To retire a patch, once no run recorded without the
// marker is open (every open run was created after the deploy that added
// the patch: flowlite runs --workflow NAME --until TIME, or
// RunFilter.Until), replace the call and the old path with
// DeprecatePatch(wc, id); once no run recorded with the marker is open
// either, remove DeprecatePatch.
//
// id follows the naming rules of step names; one that breaks them
// suspends the run (the code must be fixed) and Patched returns false.
// When the marker cannot be recorded the execution stops there, as at a
// step that could not be checkpointed, and Patched returns false: the
// body's next call returns the reason, and the run resumes later.
func Patched(wc Context, id string) bool {
	return wc.runContext().Patched(id)
}

// DeprecatePatch marks where a retired patch id was decided, in a body
// that kept only the patch's new path: a run whose history has the marker
// there replays it, and any other run records nothing. It keeps both
// kinds of runs replaying while runs recorded with the marker are still
// open; see Patched.
func DeprecatePatch(wc Context, id string) {
	wc.runContext().DeprecatePatch(id)
}

package flowtype

// CatchUp says what a schedule does about slots it missed.
//
// A slot is "missed" when the schedule falls more than flow.ScheduleGrace
// behind (no engine ran, e.g. during a deploy or an outage), and every slot
// that came due while the schedule was paused is missed when it resumes.
// Slots less late than that are never missed: they all start, whatever the
// policy. After catching up, the schedule goes on with its first slot after
// now.
type CatchUp string

// Catch-up policies.
const (
	// CatchUpOne (the default) starts one run, for the most recent missed
	// slot, and skips the others.
	CatchUpOne CatchUp = "one"
	// CatchUpAll starts a run for every missed slot, oldest first, at most
	// flow.MaxCatchUpPerTick per transaction (the rest follow at once in
	// the next).
	CatchUpAll CatchUp = "all"
	// CatchUpNone skips every missed slot.
	CatchUpNone CatchUp = "none"
)

// Valid reports whether c is one of the catch-up policies.
func (c CatchUp) Valid() bool { return c == CatchUpOne || c == CatchUpAll || c == CatchUpNone }

package flowtype

import "time"

// Clock tells the engine the current time. The engine reads it for every
// timestamp it stores and every due time it compares, so a test can move
// time instead of waiting (flowtest provides such a clock). Waiting itself
// uses real timers. Implementations must be safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
}

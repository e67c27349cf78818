package pgstore

import "time"

// SetListenIdle shortens how long the listener of s waits without a
// notification before it pings its connection.
func SetListenIdle(s *Store, d time.Duration) { s.listenIdle = d }

// InterpretError is interpretError, for the error mapping's table test.
var InterpretError = interpretError

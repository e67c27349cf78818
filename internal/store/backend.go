package store

import "time"

// Opened is a store a backend package (flow/flowsqlite) opened for an
// engine, with what the engine must know about it beside the Store.
type Opened struct {
	// Store is the store; the engine closes it.
	Store Store
	// BusyTimeout is how long a write may wait for a lock another process
	// holds; zero when unknown. A heartbeat may wait that long, so the
	// engine refuses a LeaseTimeout that does not outlast it.
	BusyTimeout time.Duration
	// ReadOnly, when not empty, names the database of a store opened only
	// to read: the engine refuses to Start, saying so.
	ReadOnly string
}

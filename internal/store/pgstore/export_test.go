package pgstore

import (
	"database/sql"
	"io/fs"
	"time"

	"github.com/flowlite/flowlite/internal/store"
)

// SetListenIdle shortens how long the listener of s waits without a
// notification before it pings its connection.
func SetListenIdle(s *Store, d time.Duration) { s.listenIdle = d }

// DB returns the pool of s.
func DB(s *Store) *sql.DB { return s.db }

// InterpretError is interpretError, for the error mapping's table test.
var InterpretError = interpretError

// SetClaimGrace sets how long a claim of s goes on after its caller's
// context ended.
func SetClaimGrace(s *Store, d time.Duration) { s.claimGrace = d }

// SchemaLockID returns the advisory lock of one purpose ("create",
// "migrate") in a schema.
func SchemaLockID(schema, purpose string) int64 { return schemaLockID(schema, purpose) }

// CopiedRuns returns how many runs the transaction t inserted by COPY.
func CopiedRuns(t store.Tx) int { return len(t.(*tx).copied) }

// KnowServer makes s believe that the server it last claimed on started
// at started (pg_postmaster_start_time() in µs), and that it is time to
// look again (look) or not.
func KnowServer(s *Store, started int64, look bool) {
	s.server.mu.Lock()
	defer s.server.mu.Unlock()
	s.server.started, s.server.checkedAt = started, time.Now()
	if look {
		s.server.checkedAt = time.Time{}
	}
}

// Migrations returns the migrations rewritten for schema, as Open applies
// them.
func Migrations(schema string) (fs.FS, error) { return migrationsIn(newQualifier(schema)) }

package sqlitestore

import "database/sql"

// Pools exposes the handles of a store to the external tests, which check
// the settings of every pooled connection.
func Pools(s *Store) (writer, reader *sql.DB) { return s.writer, s.reader }

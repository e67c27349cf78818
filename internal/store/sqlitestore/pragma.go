package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// sqlc does not compile PRAGMA statements, so the few reads that verify a
// connection's settings live here, the only SQL text outside db/queries.

// verify checks the settings every flowlite connection needs. want is the
// expected synchronous setting, or empty to accept FULL or NORMAL.
func verify(ctx context.Context, db *sql.DB, want Synchronous) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return interpretError(err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal_mode is %q, want wal (open the database with sqlitestore.DSN)", mode)
	}
	var syncLevel int
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncLevel); err != nil {
		return interpretError(err)
	}
	got := map[int]Synchronous{1: SynchronousNormal, 2: SynchronousFull}[syncLevel]
	if got == "" || (want != "" && got != want) {
		return fmt.Errorf("synchronous is %d, want %s", syncLevel, want)
	}
	var busy int
	if err := db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
		return interpretError(err)
	}
	if busy <= 0 {
		return fmt.Errorf("busy_timeout is %d, want a positive timeout", busy)
	}
	var fk int
	if err := db.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
		return interpretError(err)
	}
	if fk != 1 {
		return fmt.Errorf("foreign_keys is off, want on")
	}
	return nil
}

// IntegrityCheck runs PRAGMA integrity_check and returns its findings; an
// empty result means the file is sound.
func (s *Store) IntegrityCheck(ctx context.Context) ([]string, error) {
	rows, err := s.reader.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return nil, interpretError(err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return nil, err
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	return problems, rows.Err()
}

// fileAndBusyTimeout reads the file name and the busy timeout of a pool the
// caller opened, which ErrBusy errors report.
func fileAndBusyTimeout(ctx context.Context, db *sql.DB) (string, time.Duration, error) {
	var busy int64
	if err := db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
		return "", 0, fmt.Errorf("read busy_timeout: %w", interpretError(err))
	}
	var file string
	if err := db.QueryRowContext(ctx, "SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file); err != nil {
		return "", 0, fmt.Errorf("read database file name: %w", interpretError(err))
	}
	return file, time.Duration(busy) * time.Millisecond, nil
}

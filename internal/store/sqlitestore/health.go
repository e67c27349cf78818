package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// The file operations of store.FileMaintainer. sqlc compiles neither PRAGMA
// nor VACUUM, so their SQL text lives here, beside the pragma reads.
//
// None of them opens the database file outside SQLite: closing any
// descriptor of the file would drop every POSIX lock this process holds on
// it (sqlite.org/howtocorrupt.html). Sizes come from stat(2).

// checkpointBusyMillis bounds how long a blocking checkpoint waits for other
// connections' readers and writers. This process's writes wait behind it, so
// it is much shorter than BusyTimeoutMillis.
const checkpointBusyMillis = 1000

// checkpointBusyMillis is checkpointBusyMillis, or a quarter of the store's
// busy timeout when that is shorter: a blocking checkpoint holds the write
// lock while it waits for readers, and the writes of other processes,
// which wait for as long as their own busy timeout, must not time out
// behind it (processes sharing a file are expected to use one setting).
func (s *Store) checkpointBusyMillis() int64 {
	return max(1, min(checkpointBusyMillis, busyMillis(s.busyTimeout)/4))
}

// Path returns the file of the main database, or "" for one in memory.
func (s *Store) Path(ctx context.Context) (string, error) {
	rows, err := s.reader.QueryContext(ctx, "PRAGMA database_list")
	if err != nil {
		return "", fmt.Errorf("list databases: %w", interpretError(err))
	}
	defer rows.Close()
	for rows.Next() {
		var seq int
		var name, file string
		if err := rows.Scan(&seq, &name, &file); err != nil {
			return "", fmt.Errorf("list databases: %w", err)
		}
		if name == "main" {
			return file, rows.Close()
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("list databases: %w", interpretError(err))
	}
	return "", errors.New("list databases: no main database")
}

// FileStats returns the sizes of the database file and of its WAL.
func (s *Store) FileStats(ctx context.Context) (store.FileStats, error) {
	path, err := s.Path(ctx)
	if err != nil {
		return store.FileStats{}, fmt.Errorf("file stats: %w", err)
	}
	if path == "" {
		return store.FileStats{}, fmt.Errorf("file stats: %w: the database is in memory", flowtype.ErrNotSupported)
	}
	st := store.FileStats{Path: path}
	info, err := os.Stat(path)
	if err != nil {
		return st, fmt.Errorf("file stats: %w", err)
	}
	st.DBBytes = info.Size()
	switch info, err := os.Stat(path + "-wal"); {
	case err == nil:
		st.WALBytes = info.Size()
	case !errors.Is(err, fs.ErrNotExist):
		return st, fmt.Errorf("file stats: %w", err)
	}
	return st, nil
}

// Checkpoint runs PRAGMA wal_checkpoint(mode) on the writer connection. A
// store opened with Open has exactly one writer connection, so the
// checkpoint waits for the group-commit writer's transaction in progress,
// and the writer's next transaction waits for the checkpoint: they never
// run at once. Blocking modes wait at most about a second for readers and
// writers of other connections, and report Busy when they gave up.
func (s *Store) Checkpoint(ctx context.Context, mode flowtype.CheckpointMode) (flowtype.CheckpointResult, error) {
	res := flowtype.CheckpointResult{Mode: mode}
	if !mode.Valid() {
		return res, fmt.Errorf("checkpoint: unknown mode %q", mode)
	}
	select {
	case <-s.closing:
		return res, flowtype.ErrClosed
	default:
	}
	if s.readOnly != "" {
		// A checkpoint writes the main file.
		return res, fmt.Errorf("checkpoint: %w", s.errReadOnly())
	}
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return res, fmt.Errorf("checkpoint: %w", interpretError(err))
	}
	defer conn.Close()
	run := func() error {
		var busy int
		// mode is one of four constants (checked above), never user text.
		err := conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+string(mode)+")").
			Scan(&busy, &res.WALFrames, &res.Checkpointed)
		res.Busy = busy != 0
		return interpretError(err)
	}
	if mode == flowtype.CheckpointPassive { // never waits
		err = run()
	} else {
		err = withConnPragma(ctx, conn, "busy_timeout", s.checkpointBusyMillis(), run)
	}
	if err != nil {
		return res, fmt.Errorf("checkpoint %s: %w", mode, err)
	}
	// Not in WAL mode, SQLite reports -1 frames.
	res.WALFrames, res.Checkpointed = max(res.WALFrames, 0), max(res.Checkpointed, 0)
	return res, nil
}

// Backup writes a consistent copy of the database to dst with VACUUM INTO,
// which reads one snapshot and so does not block writers. The copy is
// written beside dst under a temporary name, synced, and then linked to
// dst, so dst never names a partial copy; an existing dst is refused
// (errors.Is(err, fs.ErrExist)) and left as it is.
func (s *Store) Backup(ctx context.Context, dst string) (err error) {
	if dst == "" {
		return errors.New("backup: destination path is empty")
	}
	abs, err := filepath.Abs(dst)
	if err != nil {
		return fmt.Errorf("backup to %s: %w", dst, err)
	}
	if err := refuseExisting(abs); err != nil {
		return fmt.Errorf("backup to %s: %w", dst, err)
	}
	// An empty file is a valid VACUUM INTO target; creating it reserves a
	// unique name.
	tmp, err := os.CreateTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".partial-*")
	if err != nil {
		return fmt.Errorf("backup to %s: %w", dst, err)
	}
	tmpPath := tmp.Name()
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("backup to %s: %w", dst, err)
	}
	defer func() {
		if rmErr := os.Remove(tmpPath); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) && err == nil {
			err = fmt.Errorf("backup to %s: remove temporary file: %w", dst, rmErr)
		}
	}()

	if err := s.vacuumInto(ctx, tmpPath); err != nil {
		return fmt.Errorf("backup to %s: %w", dst, err)
	}
	// SQLite does not sync the file VACUUM INTO writes.
	if err := syncPath(tmpPath); err != nil {
		return fmt.Errorf("backup to %s: sync: %w", dst, err)
	}
	if err := publish(tmpPath, abs); err != nil {
		return fmt.Errorf("backup to %s: %w", dst, err)
	}
	if err := syncPath(filepath.Dir(abs)); err != nil {
		return fmt.Errorf("backup to %s: sync directory: %w", dst, err)
	}
	return nil
}

// vacuumInto copies the database into the empty file at path. It runs on a
// read connection, which holds a read transaction only: writers go on. The
// read pool is query_only, which VACUUM INTO counts as writing, so the
// connection is writable for the statement's duration.
func (s *Store) vacuumInto(ctx context.Context, path string) error {
	conn, err := s.reader.Conn(ctx)
	if err != nil {
		return interpretError(err)
	}
	defer conn.Close()
	return withConnPragma(ctx, conn, "query_only", 0, func() error {
		_, err := conn.ExecContext(ctx, "VACUUM INTO ?", path)
		return interpretError(err)
	})
}

// withConnPragma sets an integer pragma of conn for the duration of fn and
// restores it. A connection whose setting cannot be restored is discarded,
// never returned to its pool with the wrong setting.
func withConnPragma(ctx context.Context, conn *sql.Conn, name string, value int64, fn func() error) error {
	var old int64
	if err := conn.QueryRowContext(ctx, "PRAGMA "+name).Scan(&old); err != nil {
		return fmt.Errorf("read %s: %w", name, interpretError(err))
	}
	if old == value {
		return fn()
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA %s = %d", name, value)); err != nil {
		return fmt.Errorf("set %s: %w", name, interpretError(err))
	}
	fnErr := fn()
	// Restore even when ctx ended.
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("PRAGMA %s = %d", name, old)); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		return errors.Join(fnErr, fmt.Errorf("restore %s: %w", name, interpretError(err)))
	}
	return fnErr
}

// refuseExisting returns an error wrapping fs.ErrExist when path exists.
func refuseExisting(path string) error {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return fmt.Errorf("%w: refusing to overwrite it", fs.ErrExist)
	case errors.Is(err, fs.ErrNotExist):
		return nil
	default:
		return err
	}
}

// publish gives the finished copy at tmp its final name dst. A hard link
// fails atomically when dst appeared meanwhile; file systems without hard
// links get a rename after a last check.
func publish(tmp, dst string) error {
	err := os.Link(tmp, dst)
	if err == nil || errors.Is(err, fs.ErrExist) {
		if err != nil {
			return fmt.Errorf("%w: refusing to overwrite it", fs.ErrExist)
		}
		return nil
	}
	if err := refuseExisting(dst); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// syncPath fsyncs a file or directory. It must never be used on the live
// database file (see the note at the top of this file).
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

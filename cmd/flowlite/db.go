package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/flowlite/flowlite/flow"
)

// withEngine opens the database named by --db or $FLOWLITE_DB, calls fn
// with an engine that is never started, and closes it.
func (a *app) withEngine(ctx context.Context, fn func(*flow.Engine) error) (err error) {
	path := a.dbPath
	if path == "" {
		path = a.getenv(envDB)
	}
	if path == "" {
		return usageErrorf("no database: pass --db PATH or set %s", envDB)
	}
	// flow.Open creates a missing file; an operator tool must not.
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("open %s: no such file (flowlite does not create databases)", path)
	case err != nil:
		return fmt.Errorf("open %s: %w", path, err)
	case info.Mode().IsRegular() && info.Size() == 0:
		// SQLite would take an empty file for an empty database and the
		// migration would write a schema into it.
		return fmt.Errorf("open %s: %w: the file is empty", path, flow.ErrNotDatabase)
	}
	e, err := flow.Open(ctx, path, nil)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := e.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", path, cerr)
		}
	}()
	return fn(e)
}

// runError rewrites the error of a read or action on run id so that an
// unknown run reads "run ID: not found" instead of the store's wording.
func runError(id string, err error) error {
	if errors.Is(err, flow.ErrRunNotFound) {
		return fmt.Errorf("run %s: %w", id, flow.ErrRunNotFound)
	}
	return err
}

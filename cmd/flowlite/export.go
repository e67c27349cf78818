package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/flowlite/flowlite/flow"
)

// exportHistory writes the history file of run id to path, or to stdout
// when path is empty. A file is written beside its final name and renamed
// once complete, so a failed export leaves no half-written history.
func (a *app) exportHistory(ctx context.Context, e *flow.Engine, id, path string) error {
	h, err := e.ExportHistory(ctx, id)
	if err != nil {
		return runError(id, err)
	}
	if path == "" {
		return h.Write(a.stdout)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("export history of run %s: %w", id, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, there is nothing to remove
	if err := h.Write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("export history of run %s: %w", id, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("export history of run %s: %w", id, err)
	}
	return nil
}

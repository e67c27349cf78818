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
	// Say what was written: with the file elsewhere, silence would leave
	// an operator to guess whether anything was.
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("export history of run %s: %w", id, err)
	}
	done := exportJSON{Run: id, File: path, Bytes: fi.Size(), Steps: len(h.Steps), Signals: len(h.Signals), Events: len(h.Events)}
	if a.json {
		return writeJSON(a.stdout, done)
	}
	_, err = fmt.Fprintf(a.stdout, "exported the history of run %s to %s: %d step call(s), %d signal(s), %d event(s), %d bytes\n",
		id, path, done.Steps, done.Signals, done.Events, done.Bytes)
	return err
}

// exportJSON is the --json output of history --export --output.
type exportJSON struct {
	Run     string `json:"run"`
	File    string `json:"file"`
	Bytes   int64  `json:"bytes"`
	Steps   int    `json:"steps"`
	Signals int    `json:"signals"`
	Events  int    `json:"events"`
}

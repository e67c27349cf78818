// Package storecopy copies a flowlite database from SQLite to PostgreSQL
// (`flowlite copy`): every run in whatever state, its steps, history,
// signals, execution numbers and streams (messages by position, lengths,
// closed state), the schedules, unique holds, debounce keys, queues,
// registered workflows and workflow definitions.
//
// The copy reads the SQLite file in one read transaction and writes the
// PostgreSQL schema in one transaction, which it checks (the row count of
// every table) before committing: the target ends up with everything or
// with nothing. No engine may work the SQLite file meanwhile: what it
// writes after the read began would not be copied, and what it does to the
// runs it leased would be lost. Copy refuses a file on which an engine
// reports itself alive.
package storecopy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// ErrLiveEngine is returned when an engine reports itself alive on the
// source database.
var ErrLiveEngine = errors.New("an engine is running on the source database")

// ErrCountMismatch is returned when the target's row counts differ from the
// source's after the copy; nothing is committed then.
var ErrCountMismatch = errors.New("copy: row counts differ")

// Source is the read side of a copy; *sqlitestore.Store implements it.
type Source interface {
	Reader() store.Reader
	CopyOut(ctx context.Context) (*store.Snapshot, store.CopyCounts, error)
}

var _ Source = (*sqlitestore.Store)(nil)

// Options adjust a copy.
type Options struct {
	// Now is the clock that tells live engines (time.Now when nil).
	Now func() time.Time
}

// Copy copies from into to and returns the counts of the rows copied.
//
// Runs keep their state. A run that was running or compensating under a
// lease loses the lease: its worker was on the old database, so the run is
// handed out afresh on the new one (a running run becomes pending, as the
// rescuer would make it; a compensating run stays compensating, unleased).
func Copy(ctx context.Context, from Source, to *pgstore.Store, opts Options) (store.CopyCounts, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	reports, err := from.Reader().EngineReportList(ctx)
	if err != nil {
		return store.CopyCounts{}, fmt.Errorf("copy: read engine reports: %w", err)
	}
	nowMs := now().UnixMilli()
	var live []string
	for _, r := range reports {
		if r.StoppedAt == 0 && r.LiveUntil > nowMs {
			live = append(live, fmt.Sprintf("%s (host %s, pid %d)", r.Owner, r.Host, r.PID))
		}
	}
	if len(live) > 0 {
		return store.CopyCounts{}, fmt.Errorf("%w: %s; stop every engine on it before copying", ErrLiveEngine, strings.Join(live, ", "))
	}

	snap, want, err := from.CopyOut(ctx)
	if err != nil {
		return store.CopyCounts{}, err
	}
	if m := want.Mismatch(snap.Counts()); m != "" {
		return store.CopyCounts{}, fmt.Errorf("%w: source read: %s", ErrCountMismatch, m)
	}
	for i := range snap.Runs {
		releaseLease(&snap.Runs[i])
	}
	return to.CopyIn(ctx, snap, func(got store.CopyCounts) error {
		if m := want.Mismatch(got); m != "" {
			return fmt.Errorf("%w (nothing was written): %s", ErrCountMismatch, m)
		}
		return nil
	})
}

// releaseLease clears the lease of a run whose worker was on the source.
func releaseLease(r *store.CopyRun) {
	if r.LeaseOwner == nil && r.LeaseExpiresAt == nil {
		return
	}
	r.LeaseOwner, r.LeaseExpiresAt = nil, nil
	if r.Status == "running" {
		r.Status = "pending"
	}
}

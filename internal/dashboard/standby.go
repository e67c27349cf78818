package dashboard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// standbyTimeout bounds the read of the standby status each page makes,
// so that a page never waits on it longer than on its own reads.
const standbyTimeout = 2 * time.Second

// standbyLine is the banner every page carries when the dashboard reads
// from a PostgreSQL standby ("" otherwise, and on SQLite): what such a
// page shows is only as new as the standby's replay, which an operator
// acting on it must know. It is read at each page, not once, because the
// lag changes by the second and a standby may be promoted meanwhile.
func (d *Dashboard) standbyLine(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, standbyTimeout)
	defer cancel()
	st, err := d.e.StandbyStatus(ctx)
	if err != nil {
		if !errors.Is(err, flow.ErrNotSupported) && !errors.Is(err, context.Canceled) {
			d.log.Warn("dashboard: standby status", "err", err)
		}
		return ""
	}
	return standbyText(st)
}

// standbyText words st for the banner. While the standby replays, its
// replay age is its lag behind the primary; once it caught up, the age
// only says how long the primary has sent nothing newer, so it is not
// called a lag.
func standbyText(st flow.StandbyStatus) string {
	if !st.Standby {
		return ""
	}
	if st.CaughtUp {
		return fmt.Sprintf("Reading from a standby, caught up with the primary (last replayed commit %s ago).", fmtSeconds(st.ReplayAge))
	}
	return fmt.Sprintf("Reading from a standby, %s behind the primary (replaying): what this page shows may be that old.", fmtSeconds(st.ReplayAge))
}

// fmtSeconds writes d in seconds, with a tenth below ten seconds, where
// the tenth still matters to a reader.
func fmtSeconds(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.0f s", d.Seconds())
}

package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// The rescuer gives back runs whose worker vanished: a run whose lease
// expired is due again, for any engine to claim.

// runRescuer periodically re-queues runs whose lease expired: their worker
// crashed, hung or lost its connection.
func (e *Engine) runRescuer(ctx context.Context) {
	rescue := func() {
		n, err := e.Rescue(ctx)
		if err == nil {
			e.loopOK("rescue expired leases")
		}
		if err != nil && ctx.Err() == nil {
			e.loopFailed("rescue expired leases", "rescue expired leases", err)
		} else if n > 0 {
			e.log.Info("rescued runs with expired leases", "runs", n)
			e.WakeAll()
		}
	}
	rescue()
	every(ctx, e.cfg.RescueInterval, rescue)
}

// Rescue re-queues every run whose lease has expired and returns how many it
// re-queued. The update re-checks status and expiry, so a run completed by
// its worker in the meantime is never touched.
//
// The runs this engine claimed and still executes (or is about to) are
// alive whatever their lease says: a lease can lapse here only because
// writes or goroutines stalled (the heartbeat waited like everything else).
// The same transaction renews their leases first, so an engine never takes
// its own live runs away and runs their bodies twice.
func (e *Engine) Rescue(ctx context.Context) (int, error) {
	const batch = 100
	total := 0
	for {
		var rescued []store.RescuedRun
		var cancelled []string
		err := e.store.Write(ctx, func(tx store.Tx) error {
			now := e.nowMs()
			cancelled = cancelled[:0]
			for _, l := range e.heldLeases() {
				cancel, err := tx.RunHeartbeat(ctx, l, now+e.cfg.LeaseTimeout.Milliseconds(), now)
				switch {
				case errors.Is(err, store.ErrLeaseLost):
					// Another worker took it over; its writes here will fail.
				case err != nil:
					return err
				case cancel:
					cancelled = append(cancelled, l.RunID)
				}
			}
			var err error
			if rescued, err = tx.RunRescue(ctx, now, batch); err != nil {
				return err
			}
			for _, r := range rescued {
				err := tx.EventAppend(ctx, store.Event{
					RunID: r.ID, At: now, Kind: flowtype.EventRunRescued,
					Detail: fmt.Sprintf("lease of fence %d expired %dms ago", r.Fence, now-r.LeaseExpiresAt),
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
		e.cancelActive(cancelled)
		total += len(rescued)
		if err != nil || len(rescued) < batch {
			return total, err
		}
	}
}

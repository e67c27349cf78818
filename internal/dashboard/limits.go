package dashboard

import (
	"context"
	"strconv"
	"strings"

	"github.com/flowlite/flowlite/flow"
)

// limitRow is one queue with limits (flow control) on the overview: each
// limit as text ("-" for none) and what the limits hold now.
type limitRow struct {
	Queue                                      string
	Concurrency, Rate, KeyConcurrency, KeyRate string
	Keys                                       string
	Running, Started, Ready, HeldBack          int
}

func (d *Dashboard) limitRows(ctx context.Context) ([]limitRow, error) {
	uses, err := d.e.QueueLimits(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]limitRow, len(uses))
	for i, u := range uses {
		l := u.Limits
		rows[i] = limitRow{Queue: u.Queue, Concurrency: countText(l.Concurrency), Rate: rateText(l.Rate),
			KeyConcurrency: countText(l.KeyConcurrency), KeyRate: rateText(l.KeyRate), Keys: keysText(l),
			Running: u.Running, Started: u.Started, Ready: u.Ready, HeldBack: u.HeldBack}
	}
	return rows, nil
}

// countText is a limit of runs, "-" for none.
func countText(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// rateText is a rate as N/PERIOD, "-" for none.
func rateText(r flow.RateLimit) string {
	if r.IsZero() {
		return "-"
	}
	return strconv.Itoa(r.Limit) + "/" + r.Period.String()
}

// keysText is a queue's fairness and per-prefix limits, "-" for none.
func keysText(l flow.QueueLimits) string {
	var parts []string
	if l.Fair {
		parts = append(parts, "fair")
	}
	for _, k := range l.Keys {
		s := k.Prefix + "*: " + countText(k.Concurrency) + " running"
		if !k.Rate.IsZero() {
			s += ", " + rateText(k.Rate)
		}
		if k.Weight > 0 {
			s += ", weight " + strconv.Itoa(k.Weight)
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

package flowtype

import (
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how often and how fast a failed step or compensation is
// attempted again: MaxAttempts in total, waiting InitialInterval ×
// Coefficient^(n-1) after the n-th failure, capped at MaxInterval and spread
// by ±Jitter. Zero fields take flow's Config.DefaultRetry, whose own zero
// fields take 5 attempts, 1s, ×2, 1m and ±20%.
//
// A waiting run holds no worker: it is released and claimed again when the
// wait is over, so long backoffs cost nothing but latency.
type RetryPolicy struct {
	// MaxAttempts is the total number of attempts, the first included.
	// A permanent error (flow.Permanent) ends the attempts earlier.
	MaxAttempts int
	// InitialInterval is the wait after the first failed attempt.
	InitialInterval time.Duration
	// Coefficient multiplies the wait after each further failure; below 1
	// it takes the default.
	Coefficient float64
	// MaxInterval caps the wait, before jitter.
	MaxInterval time.Duration
	// Jitter spreads each wait uniformly by ± this fraction (up to 1), so
	// that runs failing together do not retry together. Zero takes the
	// default; a negative value turns jitter off.
	Jitter float64
}

// WithDefaults returns p with its zero fields taken from def. A Jitter
// above 1 is lowered to 1.
func (p RetryPolicy) WithDefaults(def RetryPolicy) RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = def.MaxAttempts
	}
	if p.InitialInterval <= 0 {
		p.InitialInterval = def.InitialInterval
	}
	if p.Coefficient < 1 {
		p.Coefficient = def.Coefficient
	}
	if p.MaxInterval <= 0 {
		p.MaxInterval = def.MaxInterval
	}
	switch {
	case p.Jitter == 0:
		p.Jitter = def.Jitter
	case p.Jitter > 1:
		p.Jitter = 1
	}
	return p
}

// Backoff returns the wait after the given failed attempt (1-based), jitter
// included. It expects a policy with its defaults filled in (WithDefaults).
func (p RetryPolicy) Backoff(attempt int) time.Duration {
	d := float64(p.InitialInterval) * math.Pow(p.Coefficient, float64(attempt-1))
	if d > float64(p.MaxInterval) || math.IsInf(d, 0) {
		d = float64(p.MaxInterval)
	}
	if p.Jitter > 0 { // negative: jitter off
		d *= 1 + p.Jitter*(2*rand.Float64()-1)
	}
	return time.Duration(d)
}

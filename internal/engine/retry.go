package engine

import (
	"errors"
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how often and how fast a failed step is attempted again.
// Zero fields take the engine's defaults.
type RetryPolicy struct {
	// MaxAttempts is the total number of attempts, the first included.
	MaxAttempts int
	// InitialInterval is the wait after the first failed attempt.
	InitialInterval time.Duration
	// Coefficient multiplies the wait after each further failure.
	Coefficient float64
	// MaxInterval caps the wait.
	MaxInterval time.Duration
	// Jitter spreads each wait uniformly by ± this fraction (up to 1), so
	// that runs failing together do not retry together. Zero takes the
	// default; a negative value turns jitter off.
	Jitter float64
}

// DefaultRetryPolicy is the policy of steps that set none.
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts:     5,
	InitialInterval: time.Second,
	Coefficient:     2,
	MaxInterval:     time.Minute,
	Jitter:          0.2,
}

// WithDefaults returns p with its zero fields taken from def.
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

// Backoff returns the wait after the given failed attempt (1-based).
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

// final reports whether a failed attempt is the last one.
func (p RetryPolicy) final(attempt int, err error) bool {
	var perm *PermanentError
	return attempt >= p.MaxAttempts || errors.As(err, &perm)
}

package flowtest

import (
	"time"
)

// defaultInitialTime is where an Env's clock starts unless WithInitialTime
// says otherwise: a fixed date, so that a test's times are the same on
// every run.
func defaultInitialTime() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) }

// Option tunes an Env at New, beside the engine's flow.Config.
type Option func(*options)

type options struct {
	start    time.Time
	startSet bool
}

// WithInitialTime starts the Env's clock at start instead of
// 2025-01-01 00:00:00 UTC, as go-workflows' tester.WithInitialTime does: for a
// test of code that depends on the date (a month-end job, a schedule near a
// daylight-saving change, an expiry compared with a fixed time). Every time
// the engine records (a run's creation, due times, deadlines, flow.Now)
// counts from it. start must lie between 1970 and the year 3000 (the engine
// stores times as Unix milliseconds, and flowtest reads a due time at or
// after the year 3000 as "no time"); New fails the test for any other
// value, before it opens anything.
func WithInitialTime(start time.Time) Option {
	return func(o *options) { o.start, o.startSet = start, true }
}

// newOptions applies opts over the defaults and checks them; the error is
// what New reports.
func newOptions(opts []Option) (options, string) {
	o := options{start: defaultInitialTime()}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.startSet {
		switch {
		case o.start.IsZero():
			return o, "WithInitialTime: the zero time; give a date between 1970 and 3000"
		case o.start.Before(time.Unix(0, 0)):
			return o, "WithInitialTime(" + o.start.Format(time.RFC3339) + "): before 1970, which Unix milliseconds cannot hold"
		case o.start.Year() >= neverYear:
			return o, "WithInitialTime(" + o.start.Format(time.RFC3339) + "): at or after the year 3000, which flowtest reads as no time"
		}
	}
	return o, ""
}

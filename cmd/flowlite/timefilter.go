package main

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// window is a creation-time range; a zero bound is open.
type window struct {
	since, until time.Time // since inclusive, until exclusive
}

// parseWindow parses --since and --until relative to now.
func parseWindow(since, until string, now time.Time) (window, error) {
	var w window
	var err error
	if since != "" {
		if w.since, err = parseWhen(since, now); err != nil {
			return w, usageErrorf("invalid --since %q: %v", since, err)
		}
	}
	if until != "" {
		if w.until, err = parseWhen(until, now); err != nil {
			return w, usageErrorf("invalid --until %q: %v", until, err)
		}
	}
	if !w.since.IsZero() && !w.until.IsZero() && !w.since.Before(w.until) {
		return w, usageErrorf("invalid time range: --since %s is not before --until %s",
			w.since.Format(time.RFC3339), w.until.Format(time.RFC3339))
	}
	return w, nil
}

// whenLayouts are the absolute times --since and --until accept.
var whenLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05",
	"2006-01-02 15:04:05",
	"2006-01-02T15:04",
	"2006-01-02 15:04",
	"2006-01-02",
}

// parseWhen reads an absolute time (local unless it has a zone) or a
// duration before now, with d (days) and w (weeks) besides Go's units.
func parseWhen(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range whenLayouts {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	if d, ok := parseAgo(s); ok {
		return now.Add(-d), nil
	}
	return time.Time{}, errWhen
}

var errWhen = errors.New("want a duration before now (90s, 15m, 2h, 3d, 1w) or a time (2006-01-02, 2006-01-02T15:04:05, RFC 3339)")

func parseAgo(s string) (time.Duration, bool) {
	if n, unit := strings.TrimRight(s, "dw"), s[len(strings.TrimRight(s, "dw")):]; len(unit) == 1 && n != "" {
		v, err := strconv.ParseFloat(n, 64)
		day := 24 * time.Hour
		if unit == "w" {
			day *= 7
		}
		// NaN, infinities and spans past time.Duration's ~292 years would
		// convert to arbitrary durations, even negative ones (a time after
		// now): refuse them.
		if err != nil || !(v >= 0) || v*float64(day) >= math.MaxInt64 {
			return 0, false
		}
		return time.Duration(v * float64(day)), true
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}

// listRunsIn lists the runs of f created in w, newest first, at most
// f.Limit of them; the database applies the time bounds.
func listRunsIn(ctx context.Context, e *flow.Engine, f flow.RunFilter, w window) ([]flow.RunInfo, error) {
	f.Since, f.Until = w.since, w.until
	return e.ListRuns(ctx, f)
}

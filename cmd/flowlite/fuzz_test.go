package main

import (
	"strings"
	"testing"
	"time"
)

// FuzzFilterArgs feeds the parsers of the runs/history filters (--since,
// --until, --status) arbitrary operator input. They must never panic; what
// they accept must make sense (a relative time lies before now, a window
// is not empty, a status is one of the run states); what they refuse gets
// a usage error that quotes the flag. ago and at round-trip: a duration as
// Go prints it, and a time in RFC 3339, are always accepted as given.
func FuzzFilterArgs(f *testing.F) {
	for _, seed := range []struct {
		since, until, status string
		ago                  int64
		at                   int64
	}{
		{"2h", "", "suspended", int64(time.Hour), 0},
		{"3d", "1w", "FAILED", 90 * int64(time.Second), 1},
		{"2025-03-01", "2025-03-02T15:04:05", "", 0, -1},
		{"1.5d", "2006-01-02 15:04", "Pending", 1, 1 << 40},
		{"1e300d", "NaNw", "runnin", 1 << 62, 1 << 62},
		{"-2h", "Infd", "waiting\n", -1, -1 << 62},
		{"  15m ", "0s", "cancelled", 0, 0},
		{"d", "w", " completed", 0, 0},
	} {
		f.Add(seed.since, seed.until, seed.status, seed.ago, seed.at)
	}
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, since, until, status string, ago, at int64) {
		w, err := parseWindow(since, until, now)
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, "--since") && !strings.Contains(msg, "--until") {
				t.Fatalf("parseWindow(%q, %q): error %q names neither flag", since, until, msg)
			}
		} else {
			if !w.since.IsZero() && !w.until.IsZero() && !w.since.Before(w.until) {
				t.Fatalf("parseWindow(%q, %q) = an empty window %v", since, until, w)
			}
			if (since == "") != w.since.IsZero() && since != "" {
				t.Fatalf("parseWindow(%q, …): since dropped", since)
			}
		}
		for _, s := range []string{since, until} {
			if d, ok := parseAgo(strings.TrimSpace(s)); ok {
				when, err := parseWhen(s, now)
				if d < 0 || err != nil || when.After(now) {
					t.Fatalf("parseWhen(%q) = %v, %v (ago %s): a relative time must lie before now", s, when, err, d)
				}
			}
		}

		st, err := parseStatus(status)
		switch {
		case err != nil && !strings.Contains(err.Error(), "--status"):
			t.Fatalf("parseStatus(%q): error %q does not name the flag", status, err)
		case err == nil && status != "" && !strings.EqualFold(status, string(st)):
			t.Fatalf("parseStatus(%q) = %q", status, st)
		case err == nil && status == "" && st != "":
			t.Fatalf("parseStatus(\"\") = %q, want all", st)
		}

		// Round trips.
		if ago < 0 {
			ago = -(ago + 1)
		}
		d := time.Duration(ago)
		if when, err := parseWhen(d.String(), now); err != nil || !when.Equal(now.Add(-d)) {
			t.Fatalf("parseWhen(%q) = %v, %v; want %v", d.String(), when, err, now.Add(-d))
		}
		abs := now.Add(time.Duration(at)).Truncate(time.Millisecond)
		if when, err := parseWhen(abs.Format(time.RFC3339Nano), now); err != nil || !when.Equal(abs) {
			t.Fatalf("parseWhen(%q) = %v, %v; want %v", abs.Format(time.RFC3339Nano), when, err, abs)
		}
	})
}

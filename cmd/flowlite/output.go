package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// table prints aligned columns through text/tabwriter. Cells must come from
// cell, which removes the tabs and newlines that would break alignment.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// cell makes s fit one table cell: whitespace runs (tabs, newlines) become
// one space, an empty value becomes "-", and values longer than max runes
// are cut with an ellipsis (max <= 0: no limit).
func cell(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "-"
	}
	if max > 0 && utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max-1]) + "…"
	}
	return s
}

// Time layouts: tables are compact, history and headers carry milliseconds
// and the zone offset (RFC 3339).
const (
	tableTimeLayout = "2006-01-02 15:04:05"
	rfcMillisLayout = "2006-01-02T15:04:05.000Z07:00"
)

func tableTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(tableTimeLayout)
}

func rfcMillis(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(rfcMillisLayout)
}

// duration is finished minus started, or "-" while either is unknown.
func duration(started, finished time.Time) string {
	if started.IsZero() || finished.IsZero() {
		return "-"
	}
	return finished.Sub(started).Round(time.Millisecond).String()
}

// stepName is how a step call is written everywhere: name#occurrence, the
// occurrence counting the earlier calls of the same step in the run (from 0).
func stepName(name string, occurrence int) string {
	if name == "" {
		return "-"
	}
	return fmt.Sprintf("%s#%d", name, occurrence)
}

func workflowName(name string, version int) string {
	return fmt.Sprintf("%s(v%d)", name, version)
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// utc returns t in UTC for JSON output; the zero time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

package main

import (
	"bytes"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestRun runs the export and checks what the live view printed: every
// log line once and in order, the body's last, progress that only grows
// and ends at 100%, and the summary.
func TestRun(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(t.Context(), filepath.Join(t.TempDir(), "export.db"), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	var logs []string
	var pcts []int
	var summary string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		switch fields := strings.Fields(line); {
		case strings.HasPrefix(line, "log"):
			logs = append(logs, strings.Join(fields[1:], " "))
		case strings.HasPrefix(line, "progress"):
			pct, err := strconv.Atoi(strings.TrimSuffix(fields[1], "%"))
			if err != nil {
				t.Fatalf("progress line %q: %v", line, err)
			}
			pcts = append(pcts, pct)
		case strings.HasPrefix(line, "summary"):
			summary = line
		default:
			t.Errorf("unexpected line %q", line)
		}
	}
	var want []string
	for page := range 8 {
		want = append(want, "#"+strconv.Itoa(page)+" page "+strconv.Itoa(page+1)+": rows "+strconv.Itoa(page*1000+1)+"-"+strconv.Itoa((page+1)*1000))
	}
	want = append(want, "#8 written orders.csv")
	if !slices.Equal(logs, want) {
		t.Errorf("log lines:\n%s\nwant:\n%s", strings.Join(logs, "\n"), strings.Join(want, "\n"))
	}
	if len(pcts) < 2 || pcts[len(pcts)-1] != 100 || !slices.IsSorted(pcts) {
		t.Errorf("progress %v: want it seen on the way, growing to 100", pcts)
	}
	if summary != "summary   8000 rows in orders.csv" {
		t.Errorf("summary %q", summary)
	}
}

// Package metrics holds flowlite's metric families, read from a database
// through flow's public API (Write), and writes them in the Prometheus text
// exposition format (version 0.0.4), by hand: a handful of gauges, counters
// and histograms do not need a client library. The dashboard's /metrics and
// flow/flowprom both take their families from Write, so the two expose the
// same series.
//
// It imports flow and flow/flowtype; the text format needs only the
// standard library.
package metrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ContentType is the media type of the exposition.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Label is one label of a sample.
type Label struct{ Name, Value string }

// L builds labels from name, value pairs; it panics on an odd count.
func L(pairs ...string) []Label {
	if len(pairs)%2 != 0 {
		panic("metrics.L: odd number of arguments")
	}
	ls := make([]Label, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		ls = append(ls, Label{pairs[i], pairs[i+1]})
	}
	return ls
}

// Type is a metric family's type.
type Type string

// Metric types.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
)

// Writer writes metric families. Every family must be introduced by
// Family before its samples; the first write error sticks and is returned
// by Flush.
type Writer struct {
	w      *bufio.Writer
	err    error
	family string
	seen   map[string]bool
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriter(w), seen: make(map[string]bool)}
}

// Family starts the family name with its type and help text. A family may
// be started once.
func (w *Writer) Family(name string, typ Type, help string) {
	if w.seen[name] {
		panic("metrics: family " + name + " written twice")
	}
	w.seen[name] = true
	w.family = name
	w.printf("# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(help), name, typ)
}

// Sample writes one sample of the current family (name may carry a
// _total, _bucket, _sum or _count suffix).
func (w *Writer) Sample(name string, labels []Label, v float64) {
	if !strings.HasPrefix(name, w.family) {
		panic("metrics: sample " + name + " outside its family " + w.family)
	}
	w.printf("%s%s %s\n", name, formatLabels(labels), formatValue(v))
}

// HistogramSample writes one histogram of the current family: counts are
// per bucket, not cumulative, with one more count than bounds for the
// observations above every bound (the +Inf bucket).
func (w *Writer) HistogramSample(labels []Label, bounds []float64, counts []uint64, sum float64, count uint64) {
	var cum uint64
	for i, b := range bounds {
		if i < len(counts) {
			cum += counts[i]
		}
		w.Sample(w.family+"_bucket", append(slices.Clone(labels), Label{"le", formatValue(b)}), float64(cum))
	}
	w.Sample(w.family+"_bucket", append(slices.Clone(labels), Label{"le", "+Inf"}), float64(count))
	w.Sample(w.family+"_sum", labels, sum)
	w.Sample(w.family+"_count", labels, float64(count))
}

// Flush writes what is buffered and returns the first error.
func (w *Writer) Flush() error {
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

func (w *Writer) printf(format string, args ...any) {
	if w.err == nil {
		_, w.err = fmt.Fprintf(w.w, format, args...)
	}
}

func formatLabels(ls []Label) string {
	if len(ls) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.Name)
		b.WriteString(`="`)
		b.WriteString(escapeLabel(l.Value))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', -1, 64) // 67108864, not 6.7108864e+07
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }

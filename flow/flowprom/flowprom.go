// Package flowprom exposes flowlite's metrics as a prometheus.Collector
// that an application registers in its own registry, next to its own
// metrics:
//
//	c, err := flowprom.NewCollector(eng, nil)
//	reg.MustRegister(c)
//
// It exposes the very families `flowlite serve`'s /metrics (and
// flow/flowui's) writes, with the same names, types, help and labels: runs
// by state, queue depth, ready runs and lag, unworked queues, dead letters,
// database and WAL size, the last checkpoint, and, summed over the reports
// every engine writes to the database (flow.Reports), runs started and
// finished, attempt durations and claim latency. Each is read from the
// database at every scrape, so it shows the work of every engine on the
// database, though the process registering it may run none; the summed
// counters lag their engines by up to one report interval.
//
// The families come from internal/metrics, from which the dashboard's
// /metrics takes them too, so the two cannot drift apart. The collector is unchecked (Describe
// sends nothing): which families exist depends on the database (the WAL
// limit, a recorded checkpoint, the queues).
//
// It imports flow, internal/metrics and prometheus/client_golang.
package flowprom

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/metrics"
)

// defaultTimeout bounds a scrape's database reads, as /metrics does.
const defaultTimeout = 5 * time.Second

// Options configure a Collector. A nil *Options means the defaults.
type Options struct {
	// Logger receives the reads that failed (their families are left
	// out of the scrape); default none.
	Logger *slog.Logger
	// Timeout bounds the database reads of one scrape; default 5s.
	Timeout time.Duration
}

// Collector collects flowlite's metrics from a database at each scrape.
type Collector struct {
	e       *flow.Engine
	log     *slog.Logger // nil: reads that fail are logged nowhere
	timeout time.Duration
}

// NewCollector returns the collector of the database e works on. e need
// not be started.
func NewCollector(e *flow.Engine, opts *Options) (*Collector, error) {
	if e == nil {
		return nil, fmt.Errorf("flowprom: nil engine")
	}
	if opts == nil {
		opts = &Options{}
	}
	c := &Collector{e: e, log: opts.Logger, timeout: opts.Timeout}
	if c.timeout <= 0 {
		c.timeout = defaultTimeout
	}
	return c, nil
}

// Describe sends nothing: the collector is unchecked, since the families a
// scrape has depend on the database.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect reads the database and sends every metric.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	metrics.Write(ctx, c.e, &sink{ch: ch, descs: make(map[string]*prometheus.Desc)}, c.log)
}

// sink turns the families of metrics.Write into constant metrics.
type sink struct {
	ch    chan<- prometheus.Metric
	name  string
	typ   metrics.Type
	help  string
	descs map[string]*prometheus.Desc // by name and label names
}

func (s *sink) Family(name string, typ metrics.Type, help string) {
	s.name, s.typ, s.help = name, typ, help
}

func (s *sink) desc(name string, labels []metrics.Label) (*prometheus.Desc, []string) {
	names := make([]string, len(labels))
	values := make([]string, len(labels))
	for i, l := range labels {
		names[i], values[i] = l.Name, l.Value
	}
	key := name + "\x00" + strings.Join(names, "\x00")
	d, ok := s.descs[key]
	if !ok {
		d = prometheus.NewDesc(name, s.help, slices.Clone(names), nil)
		s.descs[key] = d
	}
	return d, values
}

func (s *sink) Sample(name string, labels []metrics.Label, v float64) {
	d, values := s.desc(name, labels)
	vt := prometheus.GaugeValue
	if s.typ == metrics.Counter {
		vt = prometheus.CounterValue
	}
	m, err := prometheus.NewConstMetric(d, vt, v, values...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, fmt.Errorf("flowprom: %s: %w", name, err))
	}
	s.ch <- m
}

func (s *sink) HistogramSample(labels []metrics.Label, bounds []float64, counts []uint64, sum float64, count uint64) {
	d, values := s.desc(s.name, labels)
	buckets := make(map[float64]uint64, len(bounds))
	var cum uint64
	for i, b := range bounds {
		if i < len(counts) {
			cum += counts[i]
		}
		buckets[b] = cum
	}
	m, err := prometheus.NewConstHistogram(d, count, sum, buckets, values...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, fmt.Errorf("flowprom: %s: %w", s.name, err))
	}
	s.ch <- m
}

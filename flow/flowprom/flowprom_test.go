package flowprom_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/flowlite/flowlite/flow/flowprom"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/flow/flowui"
	"github.com/flowlite/flowlite/internal/fixture"
)

// volatile are the families whose values change between two reads of the
// same database: their names, types, help and labels are still compared.
var volatile = []string{
	"flowlite_scrape_duration_seconds",
	"flowlite_queue_lag_seconds",
	"flowlite_queue_unworked_oldest_age_seconds",
}

// describe writes a family down line by line: name, type, help, then each
// metric's labels and value, sorted.
func describe(mf *dto.MetricFamily) []string {
	name := mf.GetName()
	out := []string{fmt.Sprintf("%s %s %q", name, mf.GetType(), mf.GetHelp())}
	var metrics []string
	for _, m := range mf.GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		slices.Sort(labels)
		line := name + "{" + strings.Join(labels, ",") + "}"
		if !slices.Contains(volatile, name) {
			switch mf.GetType() {
			case dto.MetricType_GAUGE:
				line += fmt.Sprint(" ", m.GetGauge().GetValue())
			case dto.MetricType_COUNTER:
				line += fmt.Sprint(" ", m.GetCounter().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				line += fmt.Sprint(" count ", h.GetSampleCount(), " sum ", h.GetSampleSum())
				for _, b := range h.GetBucket() {
					line += fmt.Sprint(" le ", b.GetUpperBound(), ":", b.GetCumulativeCount())
				}
			}
		}
		metrics = append(metrics, line)
	}
	slices.Sort(metrics)
	return append(out, metrics...)
}

// TestSameFamiliesAsMetricsEndpoint registers the collector in a registry
// of its own and compares what it gathers with what /metrics serves for
// the same database: the same families, types, help, labels and values.
func TestSameFamiliesAsMetricsEndpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, err := flowsqlite.Open(ctx, fixture.Build(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})

	c, err := flowprom.NewCollector(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}

	ui, err := flowui.New(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	ui.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	served, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}

	// Both sides go through the text format: the registry as the
	// application's promhttp handler serves it (which writes the +Inf
	// bucket the gathered histograms leave implicit).
	scrape := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).ServeHTTP(scrape, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if scrape.Code != http.StatusOK {
		t.Fatalf("promhttp: %d %s", scrape.Code, scrape.Body)
	}
	scraped, err := parser.TextToMetricFamilies(scrape.Body)
	if err != nil {
		t.Fatalf("parse the registry's exposition: %v", err)
	}

	var got, want []string
	for _, name := range sortedKeys(scraped) {
		got = append(got, describe(scraped[name])...)
	}
	for _, name := range sortedKeys(served) {
		want = append(want, describe(served[name])...)
	}
	if len(want) < 20 {
		t.Fatalf("/metrics served only %d lines: %v", len(want), want)
	}
	for _, fam := range []string{"flowlite_up", "flowlite_runs", "flowlite_queue_runs", "flowlite_runs_finished_total", "flowlite_attempt_duration_seconds", "flowlite_database_bytes"} {
		if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, fam+" ") }) {
			t.Errorf("the collector has no family %s", fam)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("the collector and /metrics differ:\n%s", diff(got, want))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// diff lists the lines only one side has.
func diff(got, want []string) string {
	var b strings.Builder
	for _, s := range got {
		if !slices.Contains(want, s) {
			fmt.Fprintf(&b, "+ collector: %s\n", s)
		}
	}
	for _, s := range want {
		if !slices.Contains(got, s) {
			fmt.Fprintf(&b, "- /metrics:  %s\n", s)
		}
	}
	return b.String()
}

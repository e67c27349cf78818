package metrics

import (
	"bytes"
	"math"
	"testing"
)

func TestWriter(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Family("app_runs", Gauge, "Runs by state.\nSecond line with a \\ backslash.")
	w.Sample("app_runs", L("status", "done", "queue", `we"ird\`+"\n"), 3)
	w.Sample("app_runs", nil, 67108864)
	w.Family("app_total", Counter, "A counter.")
	w.Sample("app_total", nil, 0.25)
	w.Sample("app_total", L("k", "inf"), math.Inf(1))
	w.Family("app_seconds", Histogram, "A histogram.")
	w.HistogramSample(L("kind", "step"), []float64{0.1, 1}, []uint64{2, 1, 4}, 9.5, 7)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := `# HELP app_runs Runs by state.\nSecond line with a \\ backslash.
# TYPE app_runs gauge
app_runs{status="done",queue="we\"ird\\\n"} 3
app_runs 67108864
# HELP app_total A counter.
# TYPE app_total counter
app_total 0.25
app_total{k="inf"} +Inf
# HELP app_seconds A histogram.
# TYPE app_seconds histogram
app_seconds_bucket{kind="step",le="0.1"} 2
app_seconds_bucket{kind="step",le="1"} 3
app_seconds_bucket{kind="step",le="+Inf"} 7
app_seconds_sum{kind="step"} 9.5
app_seconds_count{kind="step"} 7
`
	if got := b.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestWriterMisuse(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]func(w *Writer){
		"family twice":     func(w *Writer) { w.Family("a", Gauge, ""); w.Family("a", Gauge, "") },
		"sample elsewhere": func(w *Writer) { w.Family("a", Gauge, ""); w.Sample("b", nil, 1) },
		"odd labels":       func(*Writer) { L("a") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f(NewWriter(&bytes.Buffer{}))
		}()
	}
}

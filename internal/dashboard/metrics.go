package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/metrics"
)

// healthTimeout bounds the database reads of /healthz and /metrics.
const healthTimeout = 5 * time.Second

// metrics serves /metrics in the Prometheus text format, read from the
// database at each scrape: every engine's work shows, though this process
// runs none. The counters and histograms (runs started and finished, attempt
// durations, claim latency) are the sums of the reports the engines write
// every report interval (flow.Reports), so they lag by up to one interval,
// and they reset when the cleaner deletes the report of a long-gone engine.
func (d *Dashboard) metrics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	var buf bufferWriter
	mw := metrics.NewWriter(&buf)
	metrics.Write(ctx, d.e, mw, d.log)
	if err := mw.Flush(); err != nil {
		d.log.Error("metrics: write", "err", err)
	}
	w.Header().Set("Content-Type", metrics.ContentType)
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.b)
}

// healthz answers 200 when the database can be read, 503 otherwise.
func (d *Dashboard) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if _, err := d.e.CountRuns(ctx); err != nil {
		d.log.Warn("health check failed", "err", err)
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "unhealthy: database not readable: %v\n", err)
		return
	}
	if _, err := d.fileHealth(ctx); err != nil && !errors.Is(err, flow.ErrNotSupported) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "unhealthy: database file: %v\n", err)
		return
	}
	fmt.Fprintln(w, "ok")
}

type bufferWriter struct{ b []byte }

func (b *bufferWriter) Write(p []byte) (int, error) {
	b.b = append(b.b, p...)
	return len(p), nil
}

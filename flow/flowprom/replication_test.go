package flowprom_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowlitestream"
	"github.com/flowlite/flowlite/flow/flowprom"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// TestReplicationFamilies: an engine that replicates its file exposes who
// checkpoints (Litestream) and the replica's lag, sync interval, last sync
// and errors.
func TestReplicationFamilies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	quiet := slog.New(slog.DiscardHandler)
	e, err := flowsqlite.Open(ctx, filepath.Join(dir, "app.db"), &flow.Config{Logger: quiet},
		&flowsqlite.Options{Replication: &flowlitestream.Replication{URL: filepath.Join(dir, "replica"), SyncInterval: 100 * time.Millisecond, Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	job := flow.Job[int]{Name: "prom_noop", Handler: func(context.Context, int) error { return nil }}
	flow.RegisterJob(e, job)
	if _, err := flow.Enqueue(ctx, e, job, 1, nil); err != nil {
		t.Fatal(err)
	}
	c, err := flowprom.NewCollector(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	deadline := time.Now().Add(5 * time.Second)
	for {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
				name := mf.GetName()
				for _, l := range m.GetLabel() {
					name += "{" + l.GetName() + "=" + l.GetValue() + "}"
				}
				got[name] = v
			}
		}
		_, synced := got["flowlite_replication_last_sync_timestamp_seconds"]
		if synced {
			if got["flowlite_wal_checkpointer{by=litestream}"] != 1 {
				t.Errorf("no flowlite_wal_checkpointer{by=litestream} 1: %v", got)
			}
			if got["flowlite_replication_sync_interval_seconds"] != 0.1 {
				t.Errorf("flowlite_replication_sync_interval_seconds %v, want 0.1", got["flowlite_replication_sync_interval_seconds"])
			}
			for _, fam := range []string{"flowlite_replication_lag_seconds", "flowlite_replication_errors_total", "flowlite_replication_reported_timestamp_seconds"} {
				if _, ok := got[fam]; !ok {
					t.Errorf("no family %s", fam)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no last sync of the replica after 5s: %v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

func reportTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"EngineReports", testEngineReports},
		{"EngineReportDeleteStopped", testEngineReportDeleteStopped},
		{"CheckpointRecord", testCheckpointRecord},
	}
}

func reports(t *testing.T, s store.Store) []store.EngineReport {
	t.Helper()
	list, err := s.Reader().EngineReportList(t.Context())
	if err != nil {
		t.Fatalf("list engine reports: %v", err)
	}
	return list
}

func testEngineReports(t *testing.T, s store.Store) {
	if got := reports(t, s); len(got) != 0 {
		t.Fatalf("new store: %d reports, want none", len(got))
	}
	a := store.EngineReport{Owner: "a", Host: "h1", PID: 11, StartedAt: base + 10, ReportedAt: base + 100, Metrics: []byte(`{"n":1}`),
		Queues: []string{"default", "mail"}, LiveUntil: base + 300}
	b := store.EngineReport{Owner: "b", Host: "h2", PID: 22, StartedAt: base, ReportedAt: base + 50, Metrics: []byte(`{"n":2}`)}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.EngineReportSave(ctx, a); err != nil {
			return err
		}
		return tx.EngineReportSave(ctx, b)
	})
	got := reports(t, s)
	if len(got) != 2 {
		t.Fatalf("got %d reports, want 2", len(got))
	}
	// The engine started first comes first.
	if d := diff(b, got[0]); d != "" {
		t.Errorf("report b: %s", d)
	}
	if d := diff(a, got[1]); d != "" {
		t.Errorf("report a: %s", d)
	}

	// A second save of an owner replaces its report, queues and liveness
	// included.
	a.ReportedAt, a.Metrics, a.Queues, a.LiveUntil, a.StoppedAt = base+200, []byte(`{"n":3}`), []string{"mail"}, 0, base+200
	do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.EngineReportSave(ctx, a) })
	got = reports(t, s)
	if len(got) != 2 {
		t.Fatalf("after replacing a: %d reports, want 2", len(got))
	}
	if d := diff(a, got[1]); d != "" {
		t.Errorf("replaced report a: %s", d)
	}

	// Deleting by age keeps the reports written at or after the cutoff.
	var n int
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		n, err = tx.EngineReportDeleteBefore(ctx, base+200)
		return err
	})
	if n != 1 {
		t.Errorf("deleted %d reports, want 1 (b)", n)
	}
	got = reports(t, s)
	if owners := ownersOf(got); !slices.Equal(owners, []string{"a"}) {
		t.Errorf("after delete: owners %v, want [a]", owners)
	}
}

// testEngineReportDeleteStopped: deleting the reports of stopped engines
// by their stop time keeps every running or silent engine's report, however
// old, and a stopped one's stopped at or after the cutoff.
func testEngineReportDeleteStopped(t *testing.T, s store.Store) {
	running := store.EngineReport{Owner: "running", StartedAt: base, ReportedAt: base + 10, LiveUntil: base + 1000, Metrics: []byte(`{}`)}
	silent := store.EngineReport{Owner: "silent", StartedAt: base + 1, ReportedAt: base + 20, LiveUntil: base + 30, Metrics: []byte(`{}`)}
	old := store.EngineReport{Owner: "old", StartedAt: base + 2, ReportedAt: base + 40, StoppedAt: base + 40, Metrics: []byte(`{}`)}
	recent := store.EngineReport{Owner: "recent", StartedAt: base + 3, ReportedAt: base + 500, StoppedAt: base + 500, Metrics: []byte(`{}`)}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, r := range []store.EngineReport{running, silent, old, recent} {
			if err := tx.EngineReportSave(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	var n int
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		n, err = tx.EngineReportDeleteStoppedBefore(ctx, base+500)
		return err
	})
	if n != 1 {
		t.Errorf("deleted %d reports, want 1 (old)", n)
	}
	if owners := ownersOf(reports(t, s)); !slices.Equal(owners, []string{"running", "silent", "recent"}) {
		t.Errorf("after delete: owners %v, want [running silent recent]", owners)
	}
}

func ownersOf(list []store.EngineReport) []string {
	out := make([]string, len(list))
	for i, r := range list {
		out[i] = r.Owner
	}
	return out
}

func testCheckpointRecord(t *testing.T, s store.Store) {
	if _, err := s.Reader().CheckpointLast(t.Context()); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Fatalf("new store: last checkpoint error %v, want ErrRunNotFound", err)
	}
	first := store.CheckpointRecord{At: base, Owner: "a", Mode: flowtype.CheckpointPassive, WALBytes: 4 << 20}
	second := store.CheckpointRecord{
		At: base + 1000, Owner: "b", Mode: flowtype.CheckpointTruncate, WALBytes: 12 << 10,
		Busy: true, Error: "database is locked",
	}
	for _, want := range []store.CheckpointRecord{first, second} {
		do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.CheckpointSave(ctx, want) })
		got, err := s.Reader().CheckpointLast(t.Context())
		if err != nil {
			t.Fatalf("last checkpoint: %v", err)
		}
		if got != want {
			t.Errorf("last checkpoint %+v, want %+v", got, want)
		}
	}
}

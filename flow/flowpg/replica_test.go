package flowpg_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/internal/pgtest"
)

// onStandby returns a fresh schema on the primary and the same database on
// the streaming standby FLOWLITE_PG_STANDBY_DSN names (.ci/run makes one
// with pg_basebackup); it skips the test without one.
func onStandby(t *testing.T) (primary, standby, name string) {
	t.Helper()
	if pgtest.Pooler() != "" {
		t.Skip("the standby is reached directly")
	}
	primary, name = schema(t)
	standby, err := pgtest.StandbyDSN()
	if err != nil {
		t.Fatal(err)
	}
	if standby == "" {
		t.Skipf("needs %s: a streaming standby of the test server", pgtest.StandbyDSNEnv)
	}
	return primary, standby, name
}

// TestEngineOnAStandbyOnlyReads: an engine opened on a standby reads what
// the primary's engines recorded (once replayed), says how far behind the
// standby is, and refuses to start or to write with ErrReadOnly; a schema
// the primary has not created yet is refused with an error saying so.
func TestEngineOnAStandbyOnlyReads(t *testing.T) {
	primaryDSN, standbyDSN, schema := onStandby(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	primary, err := flowpg.Open(ctx, primaryDSN, &flow.Config{PollInterval: 10 * time.Millisecond}, &flowpg.Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close()
	runTwice(t, primary)
	done, err := primary.ListRuns(ctx, flow.RunFilter{})
	if err != nil || len(done) != 1 {
		t.Fatalf("runs on the primary: %v, %v", done, err)
	}

	var info flowpg.SchemaInfo
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err = flowpg.Inspect(ctx, standbyDSN, &flowpg.Options{Schema: schema})
		if err == nil && info.Exists && info.Flowlite && !info.Pending() && info.CaughtUp {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby did not replay the schema within 30s: %+v, %v", info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !info.Standby {
		t.Errorf("Inspect of the standby: %+v, want Standby", info)
	}
	if p, err := flowpg.Inspect(ctx, primaryDSN, &flowpg.Options{Schema: schema}); err != nil || p.Standby {
		t.Errorf("Inspect of the primary: %+v, %v; want no standby", p, err)
	}

	if _, err := flowpg.Open(ctx, standbyDSN, nil, &flowpg.Options{Schema: schema + "_none"}); err == nil || !strings.Contains(err.Error(), "primary") {
		t.Errorf("open on a standby of a schema that does not exist: %v, want an error pointing at the primary", err)
	}
	replica, err := flowpg.Open(ctx, standbyDSN, nil, &flowpg.Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatalf("open on the standby: %v", err)
	}
	defer replica.Close()
	var got flow.RunInfo
	for {
		got, err = replica.Inspect(ctx, done[0].ID)
		if err == nil && got.Status == flow.StatusCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run on the standby: %+v, %v; want it completed", got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, err := replica.StandbyStatus(ctx); err != nil || !st.Standby {
		t.Errorf("StandbyStatus on the standby: %+v, %v; want Standby", st, err)
	}
	if st, err := primary.StandbyStatus(ctx); err != nil || st.Standby || st.CaughtUp || st.ReplayAge != 0 {
		t.Errorf("StandbyStatus on the primary: %+v, %v; want no standby", st, err)
	}
	if err := replica.Start(ctx); !errors.Is(err, flow.ErrReadOnly) || !strings.Contains(err.Error(), "standby") {
		t.Errorf("Start on the standby: %v, want ErrReadOnly naming the standby", err)
	}
	flow.Register(replica, twice)
	if _, err := flow.Start(ctx, replica, twice, 1, nil); !errors.Is(err, flow.ErrReadOnly) {
		t.Errorf("a start on the standby: %v, want ErrReadOnly", err)
	}
}

package metrics_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/metrics"
	"github.com/flowlite/flowlite/internal/pgtest"
)

func scrape(ctx context.Context, e *flow.Engine) string {
	var b bytes.Buffer
	w := metrics.NewWriter(&b)
	metrics.Write(ctx, e, w, nil)
	if err := w.Flush(); err != nil {
		panic(err)
	}
	return b.String()
}

// sample returns the value of the sample line that starts with name and a
// space, and whether there is one.
func sample(out, name string) (float64, bool) {
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// TestNoStandbyFamiliesOnSQLite: a SQLite file is never a standby, so its
// scrape has no flowlite_replica_ family at all.
func TestNoStandbyFamiliesOnSQLite(t *testing.T) {
	t.Parallel()
	e, err := flowsqlite.Open(t.Context(), filepath.Join(t.TempDir(), "m.db"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if out := scrape(t.Context(), e); strings.Contains(out, "flowlite_replica_") || !strings.Contains(out, "flowlite_up 1\n") {
		t.Errorf("scrape of a SQLite file:\n%s", out)
	}
}

// TestStandbyFamilies: scraped off an engine opened on a streaming standby
// (FLOWLITE_PG_STANDBY_DSN, as .ci/run makes one), /metrics says it is a
// standby, whether it caught up and how old its last replayed commit is
// (a commit the test just made on the primary, so seconds at most); off
// the primary, it says it is none and has no replay gauges.
func TestStandbyFamilies(t *testing.T) {
	if pgtest.Pooler() != "" {
		t.Skip("the standby is reached directly")
	}
	standbyDSN, err := pgtest.StandbyDSN()
	if err != nil {
		t.Fatal(err)
	}
	if standbyDSN == "" {
		t.Skipf("needs %s: a streaming standby of the test server", pgtest.StandbyDSNEnv)
	}
	dsn, schema := pgtest.Schema(t)
	ctx := t.Context()
	primary, err := flowpg.Open(ctx, dsn, nil, &flowpg.Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close()
	if err := pgtest.AwaitStandby(ctx, standbyDSN, schema, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	replica, err := flowpg.Open(ctx, standbyDSN, nil, &flowpg.Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatalf("open on the standby: %v", err)
	}
	defer replica.Close()

	out := scrape(ctx, replica)
	for _, want := range []string{
		"# TYPE flowlite_replica_standby gauge\n", "flowlite_replica_standby 1\n",
		"# TYPE flowlite_replica_caught_up gauge\n", "# TYPE flowlite_replica_replay_age_seconds gauge\n",
		"flowlite_up 1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the standby's scrape:\n%s", want, out)
		}
	}
	if up, ok := sample(out, "flowlite_replica_caught_up"); !ok || (up != 0 && up != 1) {
		t.Errorf("flowlite_replica_caught_up %v (%v), want 0 or 1", up, ok)
	}
	if age, ok := sample(out, "flowlite_replica_replay_age_seconds"); !ok || age < 0 || age > 60 {
		t.Errorf("flowlite_replica_replay_age_seconds %v (%v), want the seconds since the schema's commit", age, ok)
	}

	out = scrape(ctx, primary)
	if v, ok := sample(out, "flowlite_replica_standby"); !ok || v != 0 {
		t.Errorf("flowlite_replica_standby on the primary: %v (%v), want 0:\n%s", v, ok, out)
	}
	if strings.Contains(out, "flowlite_replica_replay_age_seconds") || strings.Contains(out, "flowlite_replica_caught_up") {
		t.Errorf("replay gauges on the primary:\n%s", out)
	}
}

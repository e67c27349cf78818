package flowpg_test

import (
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
)

// TestInspectChangesNothing: Inspect reports a missing schema as missing
// and leaves it so, then reports the schema an engine created as
// flowlite's, at this binary's version.
func TestInspectChangesNothing(t *testing.T) {
	t.Parallel()
	dsn, s := schema(t)
	ctx := t.Context()
	opts := &flowpg.Options{Schema: s}
	for range 2 {
		st, err := flowpg.Inspect(ctx, dsn, opts)
		if err != nil {
			t.Fatal(err)
		}
		if st.Exists || st.Flowlite || st.Latest == 0 {
			t.Fatalf("Inspect of a missing schema = %+v, want it missing with the latest version known", st)
		}
	}
	e, err := flowpg.Open(ctx, dsn, &flow.Config{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := flowpg.Inspect(ctx, dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Exists || !st.Flowlite || st.Current != st.Latest || st.Pending() {
		t.Errorf("Inspect of a schema Open migrated = %+v, want flowlite's at the latest version", st)
	}
}

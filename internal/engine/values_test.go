package engine

import (
	"context"
	"maps"
	"testing"

	"github.com/flowlite/flowlite/internal/store"
)

// WithValues adds to the values a context carries, later keys winning,
// without changing what the parent context carries; encodeValues records
// them as sorted JSON, and a run's record reads back as the same map.
func TestValuesLayerAndRoundTrip(t *testing.T) {
	t.Parallel()
	bg := context.Background()
	if ValuesFrom(bg) != nil || encodeValues(bg) != nil {
		t.Fatal("a bare context carries values")
	}
	outer := WithValues(bg, map[string]string{"tenant": "acme", "trace": "t1"})
	inner := WithValues(outer, map[string]string{"trace": "t2", "user": "u"})
	if want := map[string]string{"tenant": "acme", "trace": "t1"}; !maps.Equal(ValuesFrom(outer), want) {
		t.Errorf("outer: %v, want %v (the inner WithValues changed it)", ValuesFrom(outer), want)
	}
	want := map[string]string{"tenant": "acme", "trace": "t2", "user": "u"}
	if !maps.Equal(ValuesFrom(inner), want) {
		t.Errorf("inner: %v, want %v", ValuesFrom(inner), want)
	}
	rec := encodeValues(inner)
	if string(rec) != `{"tenant":"acme","trace":"t2","user":"u"}` {
		t.Errorf("record %s, want the keys sorted", rec)
	}
	back := withRunValues(bg, store.Run{StartOptions: store.StartOptions{Context: rec}})
	if !maps.Equal(ValuesFrom(back), want) {
		t.Errorf("from the run's record: %v, want %v", ValuesFrom(back), want)
	}
	if got := withRunValues(bg, store.Run{}); got != bg {
		t.Error("a run without values gave a new context")
	}
	if got := ValuesFrom(withRunValues(bg, store.Run{StartOptions: store.StartOptions{Context: []byte(`not json`)}})); len(got) != 0 {
		t.Errorf("an undecodable record reads as %v, want none", got)
	}
}

// A start records the values of its context unless it has its own (a
// child's, inherited from its parent); the started event names the keys
// only, never the values.
func TestSetValuesAndValuesDetail(t *testing.T) {
	t.Parallel()
	ctx := WithValues(context.Background(), map[string]string{"tenant": "acme", "secret": "s3"})
	var p StartParams
	setValues(ctx, &p)
	if string(p.Context) != `{"secret":"s3","tenant":"acme"}` {
		t.Errorf("recorded %s", p.Context)
	}
	own := StartParams{Context: []byte(`{"parent":"p"}`)}
	setValues(ctx, &own)
	if string(own.Context) != `{"parent":"p"}` {
		t.Errorf("a start with its own values recorded %s", own.Context)
	}
	if got := valuesDetail(&p); got != ", context values secret, tenant" {
		t.Errorf("detail %q", got)
	}
	if got := valuesDetail(&StartParams{}); got != "" {
		t.Errorf("detail without values %q", got)
	}
}

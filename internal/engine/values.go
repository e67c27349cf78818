package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/flowlite/flowlite/internal/store"
)

// Context values (go-workflows' context propagation). Values a starter
// puts in the context it starts a run with (flow.WithValue: a tenant, a
// trace ID) are recorded with the run (store.StartOptions.Context, a JSON
// object of strings) and put back, from that record, into the context of
// every execution of the run: the workflow body, each step attempt, each
// compensation, the interceptor. A child inherits its parent's record,
// and a run started from a step's context inherits the values of the run
// the step belongs to. Since every execution reads them from the record,
// a replay, a retry on another machine, or a resume days later sees the
// values the run was started with, whatever the context of the process
// that executes it.

// valuesKey is the context key of a *values.
type valuesKey struct{}

// values is a set of context values, as recorded (raw) and decoded on
// first use: executions of runs that never read them pay nothing.
type values struct {
	raw  []byte
	once sync.Once
	m    map[string]string
}

func (v *values) get() map[string]string {
	v.once.Do(func() {
		if v.m == nil && len(v.raw) > 0 {
			// The engine encoded it from a map[string]string; a value that
			// does not decode reads as none.
			_ = json.Unmarshal(v.raw, &v.m)
		}
	})
	return v.m
}

// withRunValues returns ctx carrying the recorded values of run, or ctx
// itself when it has none.
func withRunValues(ctx context.Context, run store.Run) context.Context {
	if len(run.Context) == 0 {
		return ctx
	}
	return context.WithValue(ctx, valuesKey{}, &values{raw: run.Context})
}

// ValuesFrom returns the context values ctx carries: those WithValues
// added, over those of the run whose code ctx was given to. Callers must
// not modify the map; it is nil when there are none.
func ValuesFrom(ctx context.Context) map[string]string {
	v, _ := ctx.Value(valuesKey{}).(*values)
	if v == nil {
		return nil
	}
	return v.get()
}

// WithValues returns a copy of ctx that carries kv over the values ctx
// carries already.
func WithValues(ctx context.Context, kv map[string]string) context.Context {
	m := maps.Clone(ValuesFrom(ctx))
	if m == nil {
		m = make(map[string]string, len(kv))
	}
	maps.Copy(m, kv)
	v := &values{m: m}
	return context.WithValue(ctx, valuesKey{}, v)
}

// encodeValues returns the record of the values ctx carries, or nil.
func encodeValues(ctx context.Context) []byte {
	m := ValuesFrom(ctx)
	if len(m) == 0 {
		return nil
	}
	b, _ := json.Marshal(m) // a map[string]string always marshals, its keys sorted
	return b
}

// setValues records in p the values ctx carries, unless p has its own
// (a child's, inherited from its parent).
func setValues(ctx context.Context, p *StartParams) {
	if p.Context == nil {
		p.Context = encodeValues(ctx)
	}
}

// validValues checks the values p records: keys that follow the naming
// rules (they are printed one per line, as names are) and a record within
// the payload limit.
func (e *Engine) validValues(p *StartParams) error {
	if len(p.Context) == 0 {
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal(p.Context, &m); err != nil {
		return fmt.Errorf("start %s: context values: %w", p.Workflow, err)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := CheckName("context value key", k); err != nil {
			return fmt.Errorf("start %s: %w", p.Workflow, err)
		}
	}
	if err := e.CheckPayload("context values", p.Context); err != nil {
		return fmt.Errorf("start %s: %w", p.Workflow, err)
	}
	return nil
}

// valuesDetail is what the run_started event says of p's values: their
// keys (values may be private; Inspect shows them).
func valuesDetail(p *StartParams) string {
	if len(p.Context) == 0 {
		return ""
	}
	var m map[string]string
	if json.Unmarshal(p.Context, &m) != nil || len(m) == 0 {
		return ""
	}
	return ", context values " + strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

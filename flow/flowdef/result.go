package flowdef

import (
	"context"
	"fmt"
	"reflect"

	"github.com/flowlite/flowlite/flow"
)

// Run is a run of a defined workflow, as Start returns it: a flow.Run
// whose Result gives every output its type (see Workflow.Output).
type Run struct {
	*flow.Run[Values]
	w *Workflow
}

// Result waits until the run settles and returns its outputs, typed as
// Workflow.Output types them; see flow.Run.Result for the errors.
func (r *Run) Result(ctx context.Context) (Values, error) {
	v, err := r.Run.Result(ctx)
	if err != nil {
		return v, err
	}
	return r.w.Output(v)
}

// Output gives the outputs of a run of w their types. A run's output is
// stored as JSON, and decoding JSON into Values makes every number a
// float64: Output turns an output declared (or checked to be) an integer
// back into an int, and a number into a float64, so that out["cents"] ==
// 375 holds when the run gave 375. Outputs of other types (lists, objects,
// step outputs) keep the shape JSON gives them; Output is idempotent.
func (w *Workflow) Output(v Values) (Values, error) {
	if v == nil {
		return nil, nil
	}
	out := make(Values, len(v))
	for k, x := range v {
		out[k] = x
	}
	t := w.plan.outT
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("expr")
		x, ok := v[name]
		if !ok || x == nil {
			continue
		}
		switch f.Type.Kind() {
		case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
			reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			cv, err := convert(x, f.Type)
			if err != nil {
				return v, fmt.Errorf("workflow %s: output %s: %w", w.def.Name, name, err)
			}
			out[name] = cv.Interface()
		}
	}
	return out, nil
}

// Lookup returns a handle on the run id of w, as flow.Lookup does, whose
// Result types the outputs.
func Lookup(ctx context.Context, e *flow.Engine, w *Workflow, id string) (*Run, error) {
	run, err := flow.Lookup(ctx, e, w.Flow(), id)
	if err != nil {
		return nil, err
	}
	return &Run{Run: run, w: w}, nil
}

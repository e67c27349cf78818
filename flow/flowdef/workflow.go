package flowdef

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/flow"
)

// Values is the input and the output of a defined workflow: JSON objects
// keyed by the declared input and output names.
type Values = map[string]any

// Workflow is a compiled definition: a flow.Workflow whose body runs the
// definition's DAG. Register it on every engine that may run it.
type Workflow struct {
	def  *Definition
	plan *plan
	cat  *Catalog
	hash string
}

// Compile validates d against cat and compiles it. It reports every
// problem at once, as Errors with positions; a definition that does not
// compile cannot run (nor be stored by the tools that use Compile).
func Compile(d *Definition, cat *Catalog) (*Workflow, error) {
	if d == nil || cat == nil {
		return nil, fmt.Errorf("compile: a definition and a catalog are required")
	}
	p, err := check(d, cat)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(d.Source)
	return &Workflow{def: d, plan: p, cat: cat, hash: hex.EncodeToString(sum[:])}, nil
}

// Load parses and compiles a definition in one call. Its error lists the
// problems of both stages together: a document with a wrong key and an
// unknown step reports both.
func Load(file string, src []byte, cat *Catalog) (*Workflow, error) {
	if cat == nil {
		return nil, fmt.Errorf("load %s: a catalog is required", file)
	}
	d, err := Validate(file, src, cat)
	if err != nil {
		return nil, err
	}
	return Compile(d, cat)
}

// Validate parses src and checks it against cat, reporting every problem
// of both stages at once. With a nil cat it checks what needs no catalog
// (the document's shape, the DAG, expressions' syntax, names of inputs,
// variables and steps, declared types), taking every step and child as
// unknown: what `flowlite def validate` can tell without the program's
// steps.
func Validate(file string, src []byte, cat *Catalog) (*Definition, error) {
	d, ps := parse(file, src)
	if d == nil {
		return nil, ps.err()
	}
	_, err := check(d, cat)
	var more Errors
	if errors.As(err, &more) {
		ps.list = append(ps.list, more...)
	} else if err != nil {
		return nil, err
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return d, nil
}

// Definition returns the definition w was compiled from.
func (w *Workflow) Definition() *Definition { return w.def }

// Name returns the definition's name, the persisted workflow name.
func (w *Workflow) Name() string { return w.def.Name }

// Version returns the definition's version, the persisted workflow version.
func (w *Workflow) Version() int { return w.def.Version }

// Hash returns the SHA-256 of the definition's source, in hex: two
// documents stored as one (name, version) must have the same hash.
func (w *Workflow) Hash() string { return w.hash }

// Order returns the node IDs in the order a run starts them when several
// are ready.
func (w *Workflow) Order() []string {
	out := make([]string, len(w.plan.order))
	for i, n := range w.plan.order {
		out[i] = n.ID
	}
	return out
}

// Flow returns w as a flow.Workflow, to register, start, or call as a
// child from Go workflows.
func (w *Workflow) Flow() flow.Workflow[Values, Values] {
	return flow.Workflow[Values, Values]{Name: w.def.Name, Version: w.def.Version, Run: w.run}
}

// Register registers w on e, as flow.Register does for Go workflows. It
// does not store w's document: Install does both, so that the CLI and the
// dashboard see the definition (LoadLibrary's definitions are stored
// already).
func Register(e *flow.Engine, w *Workflow) error {
	return flow.RegisterSafely(e, w.Flow())
}

// Start starts a run of w with in, as flow.Start does. The run's Result
// types its outputs (see Workflow.Output).
func Start(ctx context.Context, e *flow.Engine, w *Workflow, in Values, opts *flow.StartOptions) (*Run, error) {
	opts, err := w.startOptions(in, opts)
	if err != nil {
		return nil, err
	}
	run, err := flow.Start(ctx, e, w.Flow(), in, opts)
	if err != nil {
		return nil, err
	}
	return &Run{Run: run, w: w}, nil
}

// startOptions returns opts with the concurrency key the definition
// derives from in, unless opts sets one.
func (w *Workflow) startOptions(in Values, opts *flow.StartOptions) (*flow.StartOptions, error) {
	if w.plan.key == nil || opts != nil && opts.ConcurrencyKey != "" {
		return opts, nil
	}
	st, err := w.newState(in)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", w.def.Name, err)
	}
	v, err := w.plan.key.eval(st.env())
	if err != nil {
		return nil, fmt.Errorf("start %s: concurrencyKey: %w", w.def.Name, err)
	}
	key, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("start %s: concurrencyKey gave %T, not a string", w.def.Name, v)
	}
	o := flow.StartOptions{}
	if opts != nil {
		o = *opts
	}
	o.ConcurrencyKey = key
	return &o, nil
}

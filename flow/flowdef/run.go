package flowdef

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"golang.org/x/sync/semaphore"

	"github.com/flowlite/flowlite/flow"
)

// state is what a run knows while its body executes: the input, the
// variables and the outputs of finished nodes. It is rebuilt on every
// replay from the recorded outputs, so it is the same each time.
type state struct {
	input, vars, steps reflect.Value // addressable structs
	done, skipped      []bool
}

// run is the body of a defined workflow. It starts the ready nodes in
// waves: every node whose needs are done, in plan order, runs through one
// flow.All (see runWave); once the wave returns, outputs and variables
// are recorded in plan order and the next wave is computed. A replay
// therefore asks for the same calls in the same order. Nodes whose
// condition is false, or that need a skipped node, are skipped as the
// pass reaches them, so later nodes of the same pass already see it.
func (w *Workflow) run(wc flow.Context, in Values) (Values, error) {
	p := w.plan
	st, err := w.newState(in)
	if err != nil {
		return nil, flow.Permanent(fmt.Errorf("workflow %s: %w", p.def.Name, err))
	}
	for {
		var wave []*cnode
		pending, skipped := 0, false
		for _, n := range p.order {
			if st.done[n.index] {
				continue
			}
			pending++
			ready, skip := true, false
			for _, j := range n.needs {
				if !st.done[j] {
					ready = false
					break
				}
				skip = skip || st.skipped[j]
			}
			if !ready {
				continue
			}
			if !skip && n.cond != nil {
				ok, err := w.condition(st, n)
				if err != nil {
					return nil, err
				}
				skip = !ok
			}
			if skip {
				skipped = true
				st.done[n.index], st.skipped[n.index] = true, true
				st.steps.Field(n.field).Field(1).SetBool(true)
				continue
			}
			wave = append(wave, n)
		}
		if pending == 0 {
			break
		}
		if len(wave) == 0 {
			if !skipped {
				// Unreachable for a checked plan (a pending node with its
				// needs done is skipped or runs); never spin.
				return nil, flow.Permanent(fmt.Errorf("workflow %s: no node can run", p.def.Name))
			}
			continue // only skips this round; their dependents are next
		}
		branches := make([]func(flow.Context) (json.RawMessage, error), len(wave))
		for i, n := range wave {
			branches[i] = func(bc flow.Context) (json.RawMessage, error) {
				out, err := w.exec(bc, st, n)
				if err != nil {
					return nil, nameNode(n.ID, err)
				}
				return out, nil
			}
		}
		outs, err := runWave(wc, branches)
		if err != nil {
			return nil, err
		}
		for i, n := range wave {
			if err := w.complete(st, n, outs[i]); err != nil {
				return nil, flow.Permanent(fmt.Errorf("step %s: %w", n.ID, err))
			}
		}
	}
	out := Values{}
	env := st.env()
	for _, o := range p.outputs {
		v, err := o.eval(env)
		if err != nil {
			return nil, flow.Permanent(fmt.Errorf("output %s: %w", o.Name, err))
		}
		out[o.Name] = v
	}
	return out, nil
}

// runWave runs the branches of a wave: through flow.All when there are
// several, so that each gets its own record scope, and directly when there
// is one, so that a chain of single nodes records its steps under their
// plain names (as a Go workflow calling them in turn would).
func runWave(wc flow.Context, branches []func(flow.Context) (json.RawMessage, error)) ([]json.RawMessage, error) {
	if len(branches) == 1 {
		out, err := branches[0](wc)
		if err != nil {
			return nil, err
		}
		return []json.RawMessage{out}, nil
	}
	return flow.All(wc, branches...)
}

// newState checks the run's input against the declared inputs (unknown
// names refused, defaults applied to absent or null keys, required ones
// present) and sets the
// variables to their defaults.
func (w *Workflow) newState(in Values) (*state, error) {
	p := w.plan
	merged := map[string]any{}
	declared := map[string]bool{}
	for _, prm := range p.def.Inputs {
		declared[prm.Name] = true
		if prm.HasDefault {
			merged[prm.Name] = prm.Default
		}
	}
	var unknown []string
	for k, v := range in {
		if !declared[k] {
			unknown = append(unknown, k)
		}
		// A key the caller set wins over the default, whatever its value
		// (false, 0, ""): only an absent key, or null (no value at all),
		// takes the default.
		if _, hasDefault := merged[k]; hasDefault && v == nil {
			continue
		}
		merged[k] = v
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("unknown inputs %v", unknown)
	}
	for _, prm := range p.def.Inputs {
		if _, ok := merged[prm.Name]; !ok {
			return nil, fmt.Errorf("input %s is required", prm.Name)
		}
	}
	input, err := convert(merged, p.inputT)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	defaults := map[string]any{}
	for _, v := range p.def.Vars {
		if v.HasDefault {
			defaults[v.Name] = v.Default
		}
	}
	vars, err := convert(defaults, p.varsT)
	if err != nil {
		return nil, fmt.Errorf("variables: %w", err)
	}
	return &state{
		input: input, vars: vars, steps: reflect.New(p.stepsT).Elem(),
		done: make([]bool, len(p.order)), skipped: make([]bool, len(p.order)),
	}, nil
}

// convert turns v into a value of type t through JSON; values of t itself
// pass as they are.
func convert(v any, t reflect.Type) (reflect.Value, error) {
	out := reflect.New(t).Elem()
	if v == nil {
		return out, nil
	}
	if rv := reflect.ValueOf(v); rv.Type().AssignableTo(t) {
		out.Set(rv)
		return out, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return out, err
	}
	got, err := decodeAs(b, t)
	if err != nil {
		return out, fmt.Errorf("%s does not decode as %s: %w", b, describe(t), err)
	}
	return got, nil
}

// env is the expression environment of the state as it is now.
func (st *state) env() map[string]any {
	return map[string]any{
		envInput: st.input.Interface(),
		envVars:  st.vars.Interface(),
		envSteps: st.steps.Interface(),
	}
}

func (w *Workflow) condition(st *state, n *cnode) (bool, error) {
	v, err := n.cond.eval(st.env())
	if err != nil {
		return false, flow.Permanent(fmt.Errorf("step %s: if: %w", n.ID, err))
	}
	b, ok := v.(bool)
	if !ok {
		return false, flow.Permanent(fmt.Errorf("step %s: if gave %T, not a boolean", n.ID, v))
	}
	return b, nil
}

// complete records a node's output in the state and applies its sets.
func (w *Workflow) complete(st *state, n *cnode, out json.RawMessage) error {
	f := st.steps.Field(n.field).Field(0)
	v, err := decodeAs(out, f.Type())
	if err != nil {
		return fmt.Errorf("output %s does not decode as %s: %w", out, describe(f.Type()), err)
	}
	f.Set(v)
	st.done[n.index] = true
	if len(n.set) == 0 {
		return nil
	}
	env := st.env()
	env[envOutput] = v.Interface()
	for _, s := range n.set {
		got, err := s.p.eval(env)
		if err != nil {
			return fmt.Errorf("set %s: %w", s.p.Name, err)
		}
		field := st.vars.Field(s.field)
		cv, err := convert(got, field.Type())
		if err != nil {
			return fmt.Errorf("set %s: %w", s.p.Name, err)
		}
		field.Set(cv)
	}
	return nil
}

// exec runs one node in its branch of the wave and returns its output as
// JSON.
func (w *Workflow) exec(bc flow.Context, st *state, n *cnode) (json.RawMessage, error) {
	switch n.Kind() {
	case "sleep":
		if err := flow.Sleep(bc, n.Sleep); err != nil {
			return nil, err
		}
		return json.RawMessage("null"), nil
	case "receive":
		return flow.Receive[json.RawMessage](bc, n.Receive.Signal, n.Receive.Timeout)
	}
	env := st.env()
	if n.forEach == nil {
		input, err := w.input(n, env)
		if err != nil {
			return nil, flow.Permanent(err)
		}
		return w.call(bc, n, input)
	}
	list, err := n.forEach.eval(env)
	if err != nil {
		return nil, flow.Permanent(fmt.Errorf("forEach: %w", err))
	}
	items := reflect.ValueOf(list)
	if list == nil {
		items = reflect.ValueOf([]any{})
	}
	if k := items.Kind(); k != reflect.Slice && k != reflect.Array {
		return nil, flow.Permanent(fmt.Errorf("forEach gave %T, not a list", list))
	}
	limit := int64(n.Parallel)
	if limit <= 0 {
		limit = int64(max(items.Len(), 1))
	}
	sem := semaphore.NewWeighted(limit)
	branches := make([]func(flow.Context) (json.RawMessage, error), items.Len())
	for i := range items.Len() {
		branches[i] = func(ic flow.Context) (json.RawMessage, error) {
			if err := sem.Acquire(ic, 1); err != nil {
				return nil, err
			}
			defer sem.Release(1)
			ienv := st.env()
			ienv[envItem] = items.Index(i).Interface()
			ienv[envIndex] = i
			input, err := w.input(n, ienv)
			if err != nil {
				return nil, flow.Permanent(fmt.Errorf("item %d: %w", i, err))
			}
			return w.call(ic, n, input)
		}
	}
	outs, err := flow.All(bc, branches...)
	if err != nil {
		return nil, err
	}
	return json.Marshal(outs)
}

// input evaluates a node's let, then its with or input, into the JSON
// the step or child decodes.
func (w *Workflow) input(n *cnode, env map[string]any) (json.RawMessage, error) {
	local := reflect.New(n.letT).Elem()
	env[envLocal] = local.Interface()
	for i, p := range n.let {
		v, err := p.eval(env)
		if err != nil {
			return nil, fmt.Errorf("let %s: %w", p.Name, err)
		}
		cv, err := convert(v, local.Field(i).Type())
		if err != nil {
			return nil, fmt.Errorf("let %s: %w", p.Name, err)
		}
		local.Field(i).Set(cv)
		env[envLocal] = local.Interface()
	}
	var v any
	switch {
	case n.input != nil:
		got, err := n.input.eval(env)
		if err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		v = got
	case len(n.with) > 0:
		m := make(map[string]any, len(n.with))
		for _, p := range n.with {
			got, err := p.eval(env)
			if err != nil {
				return nil, fmt.Errorf("with.%s: %w", p.Name, err)
			}
			m[p.Name] = got
		}
		v = m
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode input: %w", err)
	}
	return b, nil
}

// call runs the step or child workflow of n with input.
func (w *Workflow) call(bc flow.Context, n *cnode, input json.RawMessage) (json.RawMessage, error) {
	if n.child != nil {
		child := flow.Workflow[json.RawMessage, json.RawMessage]{Name: n.child.name, Version: n.child.version}
		return flow.Call(bc, child, input, nil)
	}
	var comp any
	if n.comp != nil {
		comp = n.comp.fn
	}
	return n.step.run(bc, input, overrides{name: n.ID, retry: n.retry, timeout: n.Timeout, compensate: comp})
}

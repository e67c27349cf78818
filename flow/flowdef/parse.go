package flowdef

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// identRE is what IDs and variable names look like: expressions name them
// (steps.ID.output, vars.NAME), so they must be identifiers.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// MaxSourceBytes bounds a definition's size; a larger one is refused before
// parsing.
const MaxSourceBytes = 1 << 20

// Parse reads a definition from src, a JSON or YAML document; file names it
// in positions. It checks the document's shape (known keys, value kinds,
// durations, defaults against declared types) and reports every problem
// as Errors; what refers to steps, variables and types is checked by
// Compile.
func Parse(file string, src []byte) (*Definition, error) {
	d, ps := parse(file, src)
	if err := ps.err(); err != nil {
		return nil, err
	}
	return d, nil
}

// parse reads what it can of src: the definition is nil only when the
// document could not be read at all, so that Load can go on to check the
// rest and report every problem in one pass.
func parse(file string, src []byte) (*Definition, *problems) {
	ps := &problems{}
	if len(src) > MaxSourceBytes {
		ps.add(Pos{File: file, Line: 1, Column: 1}, "definition is %d bytes, over the limit of %d", len(src), MaxSourceBytes)
		return nil, ps
	}
	root := readTree(file, src, ps)
	if root == nil {
		return nil, ps
	}
	d := &Definition{Source: append([]byte(nil), src...), Pos: root.pos}
	r := &reader{ps: ps}
	r.definition(d, root)
	return d, ps
}

type reader struct{ ps *problems }

// object checks that v is a mapping and calls fn for each key, reporting
// keys fn does not know.
func (r *reader) object(v *value, what string, fn func(f field) bool) {
	if v.kind != kindMap {
		r.ps.add(v.pos, "%s must be a mapping, not %s", what, v.kindName())
		return
	}
	for _, f := range v.fields {
		if !fn(f) {
			r.ps.add(f.keyPos, "unknown key %q in %s", f.key, what)
		}
	}
}

func (r *reader) str(v *value, what string) (string, bool) {
	s, ok := v.scalar.(string)
	if v.kind != kindScalar || !ok {
		r.ps.add(v.pos, "%s must be a string, not %s", what, v.kindName())
		return "", false
	}
	return s, true
}

func (r *reader) integer(v *value, what string, min int) (int, bool) {
	var n int64
	switch x := v.scalar.(type) {
	case int64:
		n = x
	case uint64:
		if x > math.MaxInt32 {
			r.ps.add(v.pos, "%s is too large", what)
			return 0, false
		}
		n = int64(x)
	default:
		r.ps.add(v.pos, "%s must be an integer, not %s", what, v.kindName())
		return 0, false
	}
	if v.kind != kindScalar || n < int64(min) || n > math.MaxInt32 {
		r.ps.add(v.pos, "%s must be an integer from %d to %d", what, min, math.MaxInt32)
		return 0, false
	}
	return int(n), true
}

func (r *reader) number(v *value, what string) (float64, bool) {
	switch x := v.scalar.(type) {
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	}
	r.ps.add(v.pos, "%s must be a number, not %s", what, v.kindName())
	return 0, false
}

// duration reads a Go duration ("90s", "1h30m"); a duration is a string so
// that it reads the same in JSON and YAML.
func (r *reader) duration(v *value, what string) (time.Duration, bool) {
	s, ok := r.str(v, what)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		r.ps.add(v.pos, "%s must be a non-negative duration such as \"90s\" or \"1h30m\", not %q", what, s)
		return 0, false
	}
	return d, true
}

// expr reads an expression: a string, or a number or boolean written as
// its literal.
func (r *reader) expr(name string, v *value, what string) (Expr, bool) {
	if v.kind != kindScalar || v.scalar == nil {
		r.ps.add(v.pos, "%s must be an expression (a string), not %s", what, v.kindName())
		return Expr{}, false
	}
	code := v.text
	if s, ok := v.scalar.(string); ok {
		code = s
	}
	if code == "" {
		r.ps.add(v.pos, "%s is an empty expression", what)
		return Expr{}, false
	}
	return Expr{Name: name, Code: code, Pos: v.pos}, true
}

// exprMap reads a mapping of names to expressions, in document order.
func (r *reader) exprMap(v *value, what string, identNames bool) []Expr {
	if v.kind != kindMap {
		r.ps.add(v.pos, "%s must be a mapping of names to expressions, not %s", what, v.kindName())
		return nil
	}
	var out []Expr
	for _, f := range v.fields {
		if identNames && !identRE.MatchString(f.key) {
			r.ps.add(f.keyPos, "%s name %q must be an identifier (letters, digits, _; not starting with a digit)", what, f.key)
			continue
		}
		if e, ok := r.expr(f.key, f.val, what+"."+f.key); ok {
			out = append(out, e)
		}
	}
	return out
}

func (r *reader) definition(d *Definition, v *value) {
	seen := map[string]bool{}
	r.object(v, "the definition", func(f field) bool {
		seen[f.key] = true
		switch f.key {
		case "$schema":
			r.str(f.val, "$schema")
		case "name":
			d.Name, _ = r.str(f.val, "name")
			d.NamePos = f.val.pos
		case "version":
			d.Version, _ = r.integer(f.val, "version", 1)
			d.VersionPos = f.val.pos
		case "description":
			d.Description, _ = r.str(f.val, "description")
		case "inputs":
			d.Inputs = r.params(f.val, "inputs")
		case "vars":
			d.Vars = r.params(f.val, "vars")
		case "outputs":
			d.Outputs = r.outputs(f.val)
		case "concurrencyKey":
			if e, ok := r.expr("concurrencyKey", f.val, "concurrencyKey"); ok {
				d.ConcurrencyKey = &e
			}
		case "steps":
			d.Steps = r.nodes(f.val)
		default:
			return false
		}
		return true
	})
	if v.kind != kindMap {
		return
	}
	for _, key := range []string{"name", "version", "steps"} {
		if !seen[key] {
			r.ps.add(v.pos, "missing %q", key)
		}
	}
	if seen["name"] && d.Name == "" {
		r.ps.add(d.NamePos, "name is empty")
	}
}

// outputs reads the outputs: each an expression, or a mapping with the
// expression as value and a declared type.
func (r *reader) outputs(v *value) []Expr {
	if v.kind != kindMap {
		r.ps.add(v.pos, "outputs must be a mapping of names to expressions, not %s", v.kindName())
		return nil
	}
	var out []Expr
	for _, f := range v.fields {
		what := "outputs." + f.key
		if !identRE.MatchString(f.key) {
			r.ps.add(f.keyPos, "outputs name %q must be an identifier (letters, digits, _; not starting with a digit)", f.key)
			continue
		}
		if f.val.kind != kindMap {
			if e, ok := r.expr(f.key, f.val, what); ok {
				out = append(out, e)
			}
			continue
		}
		var e Expr
		hasValue := false
		r.object(f.val, what, func(g field) bool {
			switch g.key {
			case "value":
				e, hasValue = r.expr(f.key, g.val, what+".value")
			case "type":
				if s, ok := r.str(g.val, what+".type"); ok {
					if _, known := declaredTypes[s]; !known {
						r.ps.add(g.val.pos, "%s.type %q is not one of %s", what, s, TypeNames())
					} else {
						e.Type = s
					}
				}
			case "description":
				r.str(g.val, what+".description")
			default:
				return false
			}
			return true
		})
		if !hasValue {
			r.ps.add(f.val.pos, "%s needs a value (an expression)", what)
			continue
		}
		out = append(out, e)
	}
	return out
}

func (r *reader) params(v *value, what string) []Param {
	if v.kind != kindMap {
		r.ps.add(v.pos, "%s must be a mapping of names to declarations, not %s", what, v.kindName())
		return nil
	}
	var out []Param
	for _, f := range v.fields {
		p := Param{Name: f.key, Type: "any", Pos: f.keyPos}
		if !identRE.MatchString(f.key) {
			r.ps.add(f.keyPos, "%s name %q must be an identifier (letters, digits, _; not starting with a digit)", what, f.key)
			continue
		}
		where := what + "." + f.key
		var def *value
		r.object(f.val, where, func(g field) bool {
			switch g.key {
			case "type":
				if s, ok := r.str(g.val, where+".type"); ok {
					if _, known := declaredTypes[s]; !known {
						r.ps.add(g.val.pos, "%s.type %q is not one of %s", where, s, TypeNames())
					} else {
						p.Type = s
					}
				}
			case "default":
				def = g.val
			case "description":
				r.str(g.val, where+".description")
			default:
				return false
			}
			return true
		})
		if def != nil {
			val, err := convertDefault(p.Type, def.plain())
			if err != nil {
				r.ps.add(def.pos, "%s.default: %v", where, err)
			} else {
				p.Default, p.HasDefault = val, true
			}
		}
		out = append(out, p)
	}
	return out
}

func (r *reader) nodes(v *value) []*Node {
	if v.kind != kindList {
		r.ps.add(v.pos, "steps must be a list, not %s", v.kindName())
		return nil
	}
	if len(v.list) == 0 {
		r.ps.add(v.pos, "steps is empty")
	}
	var out []*Node
	for i, e := range v.list {
		if n := r.node(e, i); n != nil {
			out = append(out, n)
		}
	}
	return out
}

func (r *reader) node(v *value, i int) *Node {
	n := &Node{Pos: v.pos}
	what := "steps[" + strconv.Itoa(i) + "]"
	kinds := 0
	hasID := false
	r.object(v, what, func(f field) bool {
		switch f.key {
		case "id":
			hasID = true
			if s, ok := r.str(f.val, what+".id"); ok {
				if !identRE.MatchString(s) {
					r.ps.add(f.val.pos, "step id %q must be an identifier (letters, digits, _; not starting with a digit)", s)
				}
				n.ID = s
			}
		case "uses":
			kinds++
			n.Uses, _ = r.str(f.val, what+".uses")
			n.UsesPos = f.val.pos
		case "sleep":
			kinds++
			n.Sleep, _ = r.duration(f.val, what+".sleep")
			n.HasSleep = true // a sleep node even when its duration is wrong
		case "receive":
			kinds++
			n.Receive = r.receive(f.val, what+".receive")
		case "call":
			kinds++
			n.Call = r.call(f.val, what+".call")
			n.UsesPos = f.val.pos
		case "needs":
			n.Needs = r.refs(f.val, what+".needs")
		case "if":
			if e, ok := r.expr("if", f.val, what+".if"); ok {
				n.If = &e
			}
		case "let":
			n.Let = r.exprMap(f.val, what+".let", true)
		case "with":
			n.With = r.exprMap(f.val, what+".with", false)
		case "input":
			if e, ok := r.expr("input", f.val, what+".input"); ok {
				n.Input = &e
			}
		case "forEach":
			if e, ok := r.expr("forEach", f.val, what+".forEach"); ok {
				n.ForEach = &e
			}
		case "parallelism":
			n.Parallel, _ = r.integer(f.val, what+".parallelism", 1)
		case "retry":
			n.Retry = r.retry(f.val, what+".retry")
		case "timeout":
			n.Timeout, _ = r.duration(f.val, what+".timeout")
		case "compensate":
			n.Compensate, _ = r.str(f.val, what+".compensate")
			n.CompensatePos = f.val.pos
		case "set":
			n.Set = r.exprMap(f.val, what+".set", true)
		case "description":
			r.str(f.val, what+".description")
		default:
			return false
		}
		return true
	})
	if v.kind != kindMap {
		return nil
	}
	if !hasID {
		r.ps.add(v.pos, "%s has no id", what)
	}
	if kinds != 1 {
		r.ps.add(v.pos, "%s must have exactly one of uses, sleep, receive and call (it has %d)", what, kinds)
	}
	return n
}

func (r *reader) refs(v *value, what string) []Ref {
	if v.kind == kindScalar {
		if s, ok := r.str(v, what); ok {
			return []Ref{{ID: s, Pos: v.pos}}
		}
		return nil
	}
	if v.kind != kindList {
		r.ps.add(v.pos, "%s must be a list of step ids, not %s", what, v.kindName())
		return nil
	}
	var out []Ref
	for _, e := range v.list {
		if s, ok := r.str(e, what+" entry"); ok {
			out = append(out, Ref{ID: s, Pos: e.pos})
		}
	}
	return out
}

func (r *reader) receive(v *value, what string) *Receive {
	rc := &Receive{}
	r.object(v, what, func(f field) bool {
		switch f.key {
		case "signal":
			rc.Signal, _ = r.str(f.val, what+".signal")
		case "timeout":
			rc.Timeout, _ = r.duration(f.val, what+".timeout")
		default:
			return false
		}
		return true
	})
	if v.kind == kindMap && rc.Signal == "" {
		r.ps.add(v.pos, "%s needs a signal name", what)
	}
	return rc
}

func (r *reader) call(v *value, what string) *Call {
	c := &Call{}
	if v.kind == kindScalar {
		c.Workflow, _ = r.str(v, what)
		return c
	}
	r.object(v, what, func(f field) bool {
		switch f.key {
		case "workflow":
			c.Workflow, _ = r.str(f.val, what+".workflow")
		case "version":
			c.Version, _ = r.integer(f.val, what+".version", 1)
		default:
			return false
		}
		return true
	})
	if v.kind == kindMap && c.Workflow == "" {
		r.ps.add(v.pos, "%s needs a workflow name", what)
	}
	return c
}

func (r *reader) retry(v *value, what string) *Retry {
	rt := &Retry{}
	r.object(v, what, func(f field) bool {
		switch f.key {
		case "maxAttempts":
			rt.MaxAttempts, _ = r.integer(f.val, what+".maxAttempts", 1)
		case "initialInterval":
			rt.InitialInterval, _ = r.duration(f.val, what+".initialInterval")
		case "maxInterval":
			rt.MaxInterval, _ = r.duration(f.val, what+".maxInterval")
		case "coefficient":
			rt.Coefficient, _ = r.number(f.val, what+".coefficient")
		case "jitter":
			rt.Jitter, _ = r.number(f.val, what+".jitter")
		default:
			return false
		}
		return true
	})
	return rt
}

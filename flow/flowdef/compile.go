package flowdef

import (
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/flowlite/flowlite/flow"
)

// cnode is a node of the compiled DAG.
type cnode struct {
	*Node
	index int   // position in plan.order, the deterministic ready order
	needs []int // indices in plan.order

	step  *stepEntry
	comp  *compEntry
	child *workflowEntry

	// outT is the type of one output (one item's, for forEach); field is
	// the node's field in the steps struct.
	outT  reflect.Type
	field int

	let     []*program
	letT    reflect.Type
	cond    *program
	forEach *program
	itemT   reflect.Type
	with    []*program
	input   *program
	set     []setter
	retry   *flow.RetryPolicy
}

type setter struct {
	p     *program
	field int // in the vars struct
}

// plan is a checked, compiled definition.
type plan struct {
	def     *Definition
	order   []*cnode
	inputT  reflect.Type
	varsT   reflect.Type
	stepsT  reflect.Type
	outputs []*program
	outT    reflect.Type
	key     *program // the runs' concurrency key, or nil
}

type compiler struct {
	def    *Definition
	cat    *Catalog
	ps     *problems
	nodes  map[string]*Node
	inputs map[string]Param
	vars   map[string]int // field index in varsT
	plan   *plan
	// labels name the made-up types of step inputs and outputs in
	// messages, by their Go types (see label).
	labels map[reflect.Type]string
}

// stepsField is the type of steps.ID in expressions.
func stepsField(out reflect.Type) reflect.Type {
	return reflect.StructOf([]reflect.StructField{
		structField(0, "output", out),
		structField(1, "skipped", reflect.TypeFor[bool]()),
	})
}

func paramsType(ps []Param) reflect.Type {
	fields := make([]reflect.StructField, len(ps))
	for i, p := range ps {
		fields[i] = structField(i, p.Name, declaredTypes[p.Type])
	}
	return reflect.StructOf(fields)
}

// checkName applies the engine's naming rule for persisted names.
func checkName(s string) string {
	switch {
	case s == "" || len(s) > 200:
		return "must be 1 to 200 bytes"
	case !utf8.ValidString(s):
		return "must be UTF-8"
	case strings.TrimSpace(s) == "":
		return "must not be only spaces"
	case strings.ContainsFunc(s, unicode.IsControl):
		return "must not contain control characters"
	}
	return ""
}

// check validates d against cat and builds its plan; every problem is
// reported.
func check(d *Definition, cat *Catalog) (*plan, error) {
	c := &compiler{def: d, cat: cat, ps: &problems{}, nodes: map[string]*Node{}, inputs: map[string]Param{}, vars: map[string]int{}}
	if why := checkName(d.Name); why != "" && d.Name != "" {
		c.ps.add(d.NamePos, "name %q %s", d.Name, why)
	}
	seenParam := map[string]Pos{}
	for _, p := range d.Inputs {
		if prev, dup := seenParam["i"+p.Name]; dup {
			c.ps.add(p.Pos, "input %s is declared twice (first at %s)", p.Name, prev)
		}
		seenParam["i"+p.Name] = p.Pos
		c.inputs[p.Name] = p
	}
	for i, p := range d.Vars {
		if prev, dup := seenParam["v"+p.Name]; dup {
			c.ps.add(p.Pos, "variable %s is declared twice (first at %s)", p.Name, prev)
		}
		seenParam["v"+p.Name] = p.Pos
		c.vars[p.Name] = i
	}
	c.plan = &plan{def: d, inputT: paramsType(d.Inputs), varsT: paramsType(d.Vars)}
	for _, n := range d.Steps {
		if n.ID == "" {
			continue
		}
		if prev, dup := c.nodes[n.ID]; dup {
			c.ps.add(n.Pos, "duplicate step id %q (first at %s)", n.ID, prev.Pos)
			continue
		}
		c.nodes[n.ID] = n
	}
	c.plan.order = c.sort()
	c.resolve()
	c.types()
	for _, n := range c.plan.order {
		c.expressions(n)
	}
	c.outputs()
	c.concurrencyKey()
	if err := c.ps.err(); err != nil {
		return nil, err
	}
	return c.plan, nil
}

// sort orders the nodes so that each comes after its needs, taking the
// earliest in document order whenever several are ready: the order in
// which a run starts ready nodes, the same on every replay. A cycle or an
// unknown need is reported (and the nodes kept in document order, so that
// the rest of the checks still run).
func (c *compiler) sort() []*cnode {
	byID := map[string]int{}
	var nodes []*Node
	for _, n := range c.def.Steps {
		if n.ID == "" || c.nodes[n.ID] != n {
			continue
		}
		byID[n.ID] = len(nodes)
		nodes = append(nodes, n)
	}
	ok := true
	deps := make([][]int, len(nodes))
	for i, n := range nodes {
		seen := map[string]bool{}
		for _, r := range n.Needs {
			j, known := byID[r.ID]
			switch {
			case !known:
				c.ps.add(r.Pos, "step %s needs unknown step %q", n.ID, r.ID)
				ok = false // the order is not needed: expressions need it
			case j == i:
				c.ps.add(r.Pos, "step %s needs itself", n.ID)
				ok = false
			case seen[r.ID]:
				c.ps.add(r.Pos, "step %s lists %s twice in needs", n.ID, r.ID)
			default:
				deps[i] = append(deps[i], j)
			}
			seen[r.ID] = true
		}
	}
	// Cycles: depth-first, reporting each once at the node that closes it.
	state := make([]int, len(nodes)) // 0 new, 1 on stack, 2 done
	var stack []int
	var visit func(i int)
	visit = func(i int) {
		state[i] = 1
		stack = append(stack, i)
		for _, j := range deps[i] {
			switch state[j] {
			case 0:
				visit(j)
			case 1:
				var path []string
				start := len(stack) - 1
				for stack[start] != j {
					start--
				}
				for _, k := range stack[start:] {
					path = append(path, nodes[k].ID)
				}
				path = append(path, nodes[j].ID)
				c.ps.add(nodes[j].Pos, "cycle: %s", strings.Join(path, " needs "))
				ok = false
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = 2
	}
	for i := range nodes {
		if state[i] == 0 {
			visit(i)
		}
	}
	if !ok {
		// No order exists, but the nodes' expressions can still be checked
		// (every problem is reported at once): take document order.
		order := make([]*cnode, len(nodes))
		for i, n := range nodes {
			order[i] = &cnode{Node: n, index: i, needs: deps[i]}
		}
		return order
	}
	placed := make([]int, len(nodes)) // index in order, or -1
	for i := range placed {
		placed[i] = -1
	}
	var order []*cnode
	for len(order) < len(nodes) {
		for i, n := range nodes {
			if placed[i] >= 0 {
				continue
			}
			ready := true
			for _, j := range deps[i] {
				if placed[j] < 0 {
					ready = false
					break
				}
			}
			if !ready {
				continue
			}
			cn := &cnode{Node: n, index: len(order)}
			for _, j := range deps[i] {
				cn.needs = append(cn.needs, placed[j])
			}
			placed[i] = len(order)
			order = append(order, cn)
			break
		}
	}
	return order
}

// resolve looks up what each node uses and checks the options that apply
// to its kind.
func (c *compiler) resolve() {
	for _, n := range c.plan.order {
		kind := n.Kind()
		if kind != "step" {
			for _, bad := range []struct {
				set  bool
				name string
			}{{n.ForEach != nil, "forEach"}, {n.Retry != nil, "retry"}, {n.Timeout > 0, "timeout"}, {n.Compensate != "", "compensate"}} {
				if bad.set {
					c.ps.add(n.Pos, "step %s: %s applies to uses steps only, not to %s", n.ID, bad.name, kind)
				}
			}
		}
		if kind != "step" && kind != "call" && (len(n.With) > 0 || n.Input != nil) {
			c.ps.add(n.Pos, "step %s: a %s takes no input (with, input)", n.ID, kind)
		}
		if len(n.With) > 0 && n.Input != nil {
			c.ps.add(n.Pos, "step %s: with and input are exclusive", n.ID)
		}
		if n.Parallel > 0 && n.ForEach == nil {
			c.ps.add(n.Pos, "step %s: parallelism applies to forEach only", n.ID)
		}
		if c.cat == nil && (kind == "step" || kind == "call") {
			continue // structural check: what the node uses is unknown
		}
		switch kind {
		case "step":
			n.step = c.cat.steps[n.Uses]
			if n.step == nil {
				c.ps.add(n.UsesPos, "step %s uses unknown step %q (the catalog has %s)", n.ID, n.Uses, strings.Join(c.cat.StepNames(), ", "))
				continue
			}
			if n.Compensate != "" {
				n.comp = c.cat.comps[n.Compensate]
				switch {
				case n.comp == nil:
					c.ps.add(n.CompensatePos, "step %s: unknown compensation %q", n.ID, n.Compensate)
				case n.comp.in != n.step.in || n.comp.out != n.step.out:
					c.ps.add(n.CompensatePos, "step %s: compensation %s takes input %s and output %s, but step %s has %s and %s",
						n.ID, n.Compensate, describe(mirror(n.comp.in)), describe(mirror(n.comp.out)), n.Uses, describe(mirror(n.step.in)), describe(mirror(n.step.out)))
				}
			}
			if n.Retry != nil {
				n.retry = &flow.RetryPolicy{MaxAttempts: n.Retry.MaxAttempts, InitialInterval: n.Retry.InitialInterval,
					MaxInterval: n.Retry.MaxInterval, Coefficient: n.Retry.Coefficient, Jitter: n.Retry.Jitter}
			}
		case "receive":
			if why := checkName(n.Receive.Signal); why != "" && n.Receive.Signal != "" {
				c.ps.add(n.Pos, "step %s: signal name %q %s", n.ID, n.Receive.Signal, why)
			}
		case "call":
			n.child = c.cat.workflow(n.Call.Workflow, n.Call.Version)
			switch {
			case n.Call.Workflow == "":
			case n.child == nil && n.Call.Version > 0:
				c.ps.add(n.UsesPos, "step %s calls unknown workflow %s version %d", n.ID, n.Call.Workflow, n.Call.Version)
			case n.child == nil:
				c.ps.add(n.UsesPos, "step %s calls unknown workflow %s", n.ID, n.Call.Workflow)
			case n.child.def != nil && n.child.def.def.Name == c.def.Name:
				c.ps.add(n.UsesPos, "step %s: a definition cannot call itself", n.ID)
			}
		}
	}
}

// types gives each node its output type and builds the steps struct.
func (c *compiler) types() {
	fields := make([]reflect.StructField, len(c.plan.order))
	for i, n := range c.plan.order {
		n.outT = anyType
		switch {
		case n.step != nil:
			n.outT = mirror(n.step.out)
			c.label(n.outT, n.step.outName, "the output of step "+n.Uses)
			c.label(mirror(n.step.in), n.step.inName, "the input of step "+n.Uses)
		case n.child != nil && n.child.def != nil:
			n.outT = n.child.def.plan.outT
			c.label(n.outT, "", "the outputs of workflow "+n.child.name)
		case n.child != nil:
			n.outT = mirror(n.child.out)
			c.label(n.outT, goName(n.child.out), "the output of workflow "+n.child.name)
		}
		t := n.outT
		if n.ForEach != nil {
			t = reflect.SliceOf(t)
		}
		n.field = i
		fields[i] = structField(i, n.ID, stepsField(t))
	}
	c.plan.stepsT = reflect.StructOf(fields)
}

// baseEnv is the environment every expression sees, with zero values of
// the right types.
func (c *compiler) baseEnv() map[string]any {
	return map[string]any{
		envInput: reflect.New(c.plan.inputT).Elem().Interface(),
		envVars:  reflect.New(c.plan.varsT).Elem().Interface(),
		envSteps: reflect.New(c.plan.stepsT).Elem().Interface(),
	}
}

func zeroOf(t reflect.Type) any {
	if t == nil || t == anyType {
		return nil
	}
	return reflect.New(t).Elem().Interface()
}

// ancestors returns the IDs of the nodes n needs, directly or not.
func (c *compiler) ancestors(n *cnode) map[string]bool {
	out := map[string]bool{}
	var walk func(i int)
	walk = func(i int) {
		for _, j := range c.plan.order[i].needs {
			id := c.plan.order[j].ID
			if !out[id] {
				out[id] = true
				walk(j)
			}
		}
	}
	walk(n.index)
	return out
}

func (c *compiler) varScope() map[string]bool {
	out := map[string]bool{}
	for name := range c.vars {
		out[name] = true
	}
	return out
}

// expressions compiles a node's expressions in the order a run evaluates
// them: if (once, before anything else), forEach, then per item let and
// with (or input), and set once the node has its output.
func (c *compiler) expressions(n *cnode) {
	sc := scope{steps: c.ancestors(n), vars: c.varScope(), node: n.ID}
	if n.If != nil {
		if p, ok := c.compileExpr(*n.If, c.baseEnv(), sc, "if"); ok {
			n.cond = p
			if p.typ != nil && p.typ.Kind() != reflect.Bool {
				c.ps.add(n.If.Pos, "step %s: if must be a boolean, not %s", n.ID, describe(p.typ))
			}
		}
	}
	env := c.baseEnv()
	if n.ForEach != nil {
		if p, ok := c.compileExpr(*n.ForEach, env, sc, "forEach"); ok {
			n.forEach = p
			switch {
			case p.typ == nil:
			case p.typ.Kind() == reflect.Slice || p.typ.Kind() == reflect.Array:
				n.itemT = p.typ.Elem()
			default:
				c.ps.add(n.ForEach.Pos, "step %s: forEach must yield a list, not %s", n.ID, describe(p.typ))
			}
		}
		env[envItem] = zeroOf(n.itemT)
		env[envIndex] = 0
	}
	var letFields []reflect.StructField
	for _, e := range n.Let {
		if p, ok := c.compileExpr(e, env, sc, "let."+e.Name); ok {
			n.let = append(n.let, p)
			t := p.typ
			if t == nil {
				t = anyType
			}
			letFields = append(letFields, structField(len(letFields), e.Name, t))
		}
	}
	n.letT = reflect.StructOf(letFields)
	env[envLocal] = reflect.New(n.letT).Elem().Interface()
	c.inputExprs(n, env, sc)
	outT := n.outT
	if n.ForEach != nil {
		outT = reflect.SliceOf(outT)
	}
	setEnv := c.baseEnv()
	setEnv[envOutput] = zeroOf(outT)
	for _, e := range n.Set {
		field, known := c.vars[e.Name]
		if !known {
			c.ps.add(e.Pos, "step %s sets unknown variable %s (declare it under vars)", n.ID, e.Name)
			continue
		}
		if p, ok := c.compileExpr(e, setEnv, sc, "set."+e.Name); ok {
			want := c.plan.varsT.Field(field).Type
			if ok, why := compatible(p.typ, want); !ok {
				c.ps.add(e.Pos, "step %s: set %s: type mismatch: %s", n.ID, e.Name, why)
			}
			n.set = append(n.set, setter{p: p, field: field})
		}
	}
}

// inputExprs checks a node's input against the type it is decoded into:
// the step's In, or the child workflow's input.
func (c *compiler) inputExprs(n *cnode, env map[string]any, sc scope) {
	var want reflect.Type
	switch {
	case n.step != nil:
		want = mirror(n.step.in)
	case n.child != nil && n.child.def != nil:
		want = n.child.def.plan.inputT
		c.label(want, "", "the inputs of workflow "+n.child.name)
	case n.child != nil:
		want = mirror(n.child.in)
		c.label(want, goName(n.child.in), "the input of workflow "+n.child.name)
	}
	if n.Input != nil {
		if p, ok := c.compileExpr(*n.Input, env, sc, "input"); ok {
			n.input = p
			if ok, why := compatible(p.typ, want); !ok {
				c.ps.add(n.Input.Pos, "step %s: input: type mismatch: %s", n.ID, why)
			}
		}
		return
	}
	if len(n.With) == 0 {
		return
	}
	var fields map[string]reflect.Type
	if want != nil && want != anyType {
		switch want.Kind() {
		case reflect.Struct:
			fields = fieldsOf(want)
		case reflect.Map:
		default:
			c.ps.add(n.Pos, "step %s: with needs an input with fields, but %s takes %s (use input)", n.ID, n.Uses, describe(want))
			return
		}
	}
	for _, e := range n.With {
		var ft reflect.Type
		if fields != nil {
			t, known := fields[e.Name]
			if !known {
				c.ps.add(e.Pos, "step %s: with.%s: %s", n.ID, e.Name, c.noField(want, e.Name))
				continue
			}
			ft = t
		} else if want != nil && want.Kind() == reflect.Map {
			ft = want.Elem()
		}
		p, ok := c.compileExpr(e, env, sc, "with."+e.Name)
		if !ok {
			continue
		}
		if ok, why := compatible(p.typ, ft); !ok {
			c.ps.add(e.Pos, "step %s: with.%s: type mismatch: %s", n.ID, e.Name, why)
		}
		n.with = append(n.with, p)
	}
}

// concurrencyKey compiles the definition's concurrency key, which sees the
// input only: it is evaluated as the run starts.
func (c *compiler) concurrencyKey() {
	e := c.def.ConcurrencyKey
	if e == nil {
		return
	}
	sc := scope{steps: map[string]bool{}, vars: map[string]bool{}}
	p, ok := c.compileExpr(*e, c.baseEnv(), sc, "concurrencyKey")
	if !ok {
		return
	}
	if ok, why := compatible(p.typ, declaredTypes["string"]); !ok {
		c.ps.add(e.Pos, "concurrencyKey must be a string: %s", why)
		return
	}
	c.plan.key = p
}

// outputs compiles the definition's outputs, which see every node.
func (c *compiler) outputs() {
	all := map[string]bool{}
	for id := range c.nodes {
		all[id] = true
	}
	sc := scope{steps: all, vars: c.varScope()}
	env := c.baseEnv()
	var fields []reflect.StructField
	for _, e := range c.def.Outputs {
		p, ok := c.compileExpr(e, env, sc, "outputs."+e.Name)
		if !ok {
			continue
		}
		c.plan.outputs = append(c.plan.outputs, p)
		t := p.typ
		if e.Type != "" {
			// The declared type wins, so that generated code and the
			// engine agree; the expression must yield it.
			declared := declaredTypes[e.Type]
			if ok, why := compatible(p.typ, declared); !ok {
				c.ps.add(e.Pos, "outputs.%s: type mismatch: %s", e.Name, why)
			}
			t = declared
		}
		if t == nil {
			t = anyType
		}
		fields = append(fields, structField(len(fields), e.Name, t))
	}
	c.plan.outT = reflect.StructOf(fields)
}

package flowdef

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

// Names an expression may use, besides the builtins.
const (
	envInput  = "input"  // the run's input, by declared name
	envVars   = "vars"   // global variables
	envSteps  = "steps"  // steps.ID.output and steps.ID.skipped of earlier nodes
	envLocal  = "local"  // the node's let variables
	envItem   = "item"   // the element of forEach
	envIndex  = "index"  // its position
	envOutput = "output" // the node's output, in set
)

// program is a compiled expression and the type it yields (nil: unknown).
type program struct {
	Expr
	prog  *vm.Program
	typ   reflect.Type
	envT  reflect.Type // the struct the expression was checked against
	names []string     // envT's fields, by index
}

// envStruct turns an environment of sample values into a struct type, so
// that a name whose type is unknown (a nil sample) is an interface the
// checker lets through, rather than the nil type.
func envStruct(env map[string]any) (reflect.Type, []string) {
	names := make([]string, 0, len(env))
	for name := range env {
		names = append(names, name)
	}
	slices.Sort(names)
	fields := make([]reflect.StructField, len(names))
	for i, name := range names {
		t := reflect.TypeOf(env[name])
		if t == nil {
			t = anyType
		}
		fields[i] = structField(i, name, t)
	}
	return reflect.StructOf(fields), names
}

// exprOptions make expressions deterministic: the builtin now() reads the
// wall clock, which a replay would not see again, and dates are read in
// UTC whatever the machine's time zone.
func exprOptions(env any) []expr.Option {
	return []expr.Option{expr.Env(env), expr.DisableBuiltin("now"), expr.Timezone("UTC"), expr.MaxNodes(2000)}
}

// scope says which names of steps and vars an expression may refer to.
type scope struct {
	steps map[string]bool // reachable node IDs
	vars  map[string]bool
	node  string // the node the expression belongs to, for messages
}

// compileExpr checks and compiles e against env. References to steps that
// are not among the node's needs and to undeclared variables are reported
// in words before the type checker sees them.
func (c *compiler) compileExpr(e Expr, env map[string]any, sc scope, what string) (*program, bool) {
	if sc.node != "" {
		what = "step " + sc.node + ": " + what
	}
	tree, err := parser.Parse(e.Code)
	if err != nil {
		c.exprError(e, what, err)
		return nil, false
	}
	ok := true
	ast.Walk(&tree.Node, refVisitor(func(base, prop string) {
		switch base {
		case envSteps:
			if _, known := c.nodes[prop]; !known {
				c.ps.add(e.Pos, "%s: unknown step %q", what, prop)
				ok = false
			} else if !sc.steps[prop] {
				c.ps.add(e.Pos, "%s: steps.%s is not among its needs (directly or through other steps)", what, prop)
				ok = false
			}
		case envVars:
			if !sc.vars[prop] {
				c.ps.add(e.Pos, "%s: unknown variable vars.%s", what, prop)
				ok = false
			}
		case envInput:
			if _, known := c.inputs[prop]; !known {
				c.ps.add(e.Pos, "%s: unknown input input.%s", what, prop)
				ok = false
			}
		}
	}))
	if !ok {
		return nil, false
	}
	envT, names := envStruct(env)
	prog, err := expr.Compile(e.Code, exprOptions(reflect.New(envT).Elem().Interface())...)
	if err != nil {
		c.exprError(e, what, err)
		return nil, false
	}
	t := prog.Node().Type()
	if t != nil && t.Kind() == reflect.Interface {
		t = nil
	}
	return &program{Expr: e, prog: prog, typ: t, envT: envT, names: names}, true
}

func (c *compiler) exprError(e Expr, what string, err error) {
	var fe *file.Error
	if errors.As(err, &fe) {
		c.ps.add(e.Pos, "%s: %s (expression %q, column %d)", what, c.rewrite(fe.Message), e.Code, fe.Column+1)
		return
	}
	c.ps.add(e.Pos, "%s: %v", what, err)
}

// refVisitor calls fn for each NAME.PROP or NAME["PROP"] in an expression.
type refVisitor func(base, prop string)

func (v refVisitor) Visit(n *ast.Node) {
	m, ok := (*n).(*ast.MemberNode)
	if !ok {
		return
	}
	id, ok := m.Node.(*ast.IdentifierNode)
	if !ok {
		return
	}
	if s, ok := m.Property.(*ast.StringNode); ok {
		v(id.Value, s.Value)
	}
}

// eval runs p in env, copied into the struct p was checked against.
func (p *program) eval(env map[string]any) (any, error) {
	v := reflect.New(p.envT).Elem()
	for i, name := range p.names {
		if x := env[name]; x != nil {
			f := v.Field(i)
			xv := reflect.ValueOf(x)
			if !xv.Type().AssignableTo(f.Type()) {
				return nil, fmt.Errorf("%s is %T, not %s", name, x, f.Type())
			}
			f.Set(xv)
		}
	}
	return expr.Run(p.prog, v.Interface())
}

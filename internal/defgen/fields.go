package defgen

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"

	"github.com/flowlite/flowlite/flow/flowdef"
)

// fieldUse is a JSON field of a step's input or output type that the
// definition names: a key of with, or steps.ID.output.FIELD (output.FIELD
// in the node's own set) in an expression.
type fieldUse struct {
	typ  string // the Go type, e.g. ExtractInput
	json string
	pos  flowdef.Pos
	what string // for messages
}

// fieldUses lists the fields d names of its steps' Go types. Nodes that
// fan out (forEach) have a list as output, whose elements' fields an
// expression reaches only through map and the like, which is left to
// the type checker of Validate<Name>.
func fieldUses(d *flowdef.Definition) []fieldUse {
	byID := map[string]*flowdef.Node{}
	for _, n := range d.Steps {
		byID[n.ID] = n
	}
	outputOf := func(n *flowdef.Node) (string, bool) {
		if n == nil || n.Kind() != "step" || n.ForEach != nil {
			return "", false
		}
		return Exported(n.Uses) + "Output", true
	}
	var uses []fieldUse
	scan := func(e *flowdef.Expr, self *flowdef.Node, what string) {
		if e == nil {
			return
		}
		tree, err := parser.Parse(e.Code)
		if err != nil {
			return // validation has reported it
		}
		ast.Walk(&tree.Node, visitor(func(n *ast.Node) {
			field, base, ok := member(*n)
			if !ok {
				return
			}
			// output.FIELD, in set: the node's own output.
			if id, ok := base.(*ast.IdentifierNode); ok && id.Value == "output" && self != nil {
				if typ, ok := outputOf(self); ok {
					uses = append(uses, fieldUse{typ, field, e.Pos, what + ": output." + field})
				}
				return
			}
			// steps.ID.output.FIELD
			out, base, ok := member(base)
			if !ok || out != "output" {
				return
			}
			id, base, ok := member(base)
			if !ok {
				return
			}
			if steps, ok := base.(*ast.IdentifierNode); !ok || steps.Value != "steps" {
				return
			}
			if typ, ok := outputOf(byID[id]); ok {
				uses = append(uses, fieldUse{typ, field, e.Pos, what + ": steps." + id + ".output." + field})
			}
		}))
	}
	for _, n := range d.Steps {
		what := "step " + n.ID
		if n.Kind() == "step" {
			for _, e := range n.With {
				uses = append(uses, fieldUse{Exported(n.Uses) + "Input", e.Name, e.Pos, what + ": with " + e.Name})
			}
		}
		scan(n.If, nil, what+": if")
		scan(n.Input, nil, what+": input")
		scan(n.ForEach, nil, what+": forEach")
		for _, group := range []struct {
			name  string
			exprs []flowdef.Expr
		}{{"let", n.Let}, {"with", n.With}, {"set", n.Set}} {
			for i := range group.exprs {
				var self *flowdef.Node
				if group.name == "set" {
					self = n
				}
				scan(&group.exprs[i], self, what+": "+group.name+" "+group.exprs[i].Name)
			}
		}
	}
	for i := range d.Outputs {
		scan(&d.Outputs[i], nil, "output "+d.Outputs[i].Name)
	}
	return uses
}

// member splits NODE.FIELD (or NODE["FIELD"]) into FIELD and NODE.
func member(n ast.Node) (string, ast.Node, bool) {
	m, ok := n.(*ast.MemberNode)
	if !ok {
		return "", nil, false
	}
	s, ok := m.Property.(*ast.StringNode)
	if !ok {
		return "", nil, false
	}
	return s.Value, m.Node, true
}

type visitor func(*ast.Node)

func (v visitor) Visit(n *ast.Node) { v(n) }

// fieldCheck is a step type and the Go selectors of the fields the
// definition names, sorted.
type fieldCheck struct {
	typ       string
	selectors []string
}

// fieldChecks resolves uses against the Go package in dir. A use with no
// Go field is an error at its place in the definition, naming the type.
func fieldChecks(uses []fieldUse, dir, genHeader string) ([]fieldCheck, error) {
	if len(uses) == 0 {
		return nil, nil
	}
	gp, err := loadPackage(dir, genHeader)
	if err != nil {
		return nil, fmt.Errorf("load the step types: %w", err)
	}
	slices.SortStableFunc(uses, func(a, b fieldUse) int {
		return cmp.Or(cmp.Compare(a.pos.Line, b.pos.Line), cmp.Compare(a.pos.Column, b.pos.Column))
	})
	fields := map[string]map[string]string{}
	typeErrs := map[string]error{}
	selectors := map[string]map[string]bool{}
	var errs []error
	for _, u := range uses {
		fs, ok := fields[u.typ]
		if !ok {
			if _, failed := typeErrs[u.typ]; !failed {
				fs, err = gp.jsonFields(u.typ)
				if err != nil {
					typeErrs[u.typ] = err
				}
				fields[u.typ] = fs
			}
		}
		if err := typeErrs[u.typ]; err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", u.pos, u.what, err))
			continue
		}
		sel, ok := fs[u.json]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s: the Go type %s (in %s) has no field named %q in JSON (it has %s)",
				u.pos, u.what, u.typ, gp.dir, u.json, jsonNames(fs)))
			continue
		}
		if selectors[u.typ] == nil {
			selectors[u.typ] = map[string]bool{}
		}
		selectors[u.typ][sel] = true
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var checks []fieldCheck
	for _, typ := range slices.Sorted(maps.Keys(selectors)) {
		checks = append(checks, fieldCheck{typ: typ, selectors: slices.Sorted(maps.Keys(selectors[typ]))})
	}
	return checks, nil
}

func jsonNames(fs map[string]string) string {
	if len(fs) == 0 {
		return "no fields"
	}
	return strings.Join(slices.Sorted(maps.Keys(fs)), ", ")
}

// varName is a local variable name for a value of the exported type typ:
// its leading capitals lower-cased, as Go names an initialism
// (URLInput → urlInput, ExtractInput → extractInput).
func varName(typ string) string {
	rs := []rune(typ)
	i := 0
	for i < len(rs) && unicode.IsUpper(rs[i]) {
		i++
	}
	if i > 1 && i < len(rs) {
		i-- // the last capital starts the next word
	}
	for j := range i {
		rs[j] = unicode.ToLower(rs[j])
	}
	return string(rs)
}

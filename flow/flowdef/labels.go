package flowdef

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Expressions see a step's types through mirror, as made-up structs whose
// Go spelling (struct { F0 string "json:\"batch\" ..." }) means nothing to
// a definition's author. The compiler labels each made-up type of a step's
// input and output with the Go type it mirrors and the step, and rewrites
// the expression checker's messages with those labels.

// goName is how messages name a Go type: its name without the package
// (OpenBatchInput), or its spelling when it has none ([]int).
func goName(t reflect.Type) string {
	if t == nil {
		return "any"
	}
	if t.Name() != "" {
		return t.Name()
	}
	return t.String()
}

// label names the made-up type t, which mirrors the Go type goType, as
// what it is: "the Go type OpenBatchOutput (the output of step
// open_batch)". The first label of a type stays (two steps may share a
// Go type).
func (c *compiler) label(t reflect.Type, goType, what string) {
	if !isMadeUp(t) {
		return
	}
	if c.labels == nil {
		c.labels = map[reflect.Type]string{}
	}
	if _, ok := c.labels[t]; ok {
		return
	}
	if goType == "" || strings.HasPrefix(goType, "struct {") {
		c.labels[t] = what + " " + describe(t)
		return
	}
	c.labels[t] = fmt.Sprintf("the Go type %s (%s)", goType, what)
}

// name returns the label of t, or its description.
func (c *compiler) name(t reflect.Type) string {
	if l, ok := c.labels[t]; ok {
		return l
	}
	return describe(t)
}

// noField says that t has no field named field, and which fields it has,
// as the generator says it.
func (c *compiler) noField(t reflect.Type, field string) string {
	return fmt.Sprintf("%s has no field named %q in JSON (it has %s)", c.name(t), field, fieldList(t))
}

func fieldList(t reflect.Type) string {
	if !isMadeUp(t) || t.NumField() == 0 {
		return "no fields"
	}
	return strings.Join(slices.Sorted(maps.Keys(fieldsOf(t))), ", ")
}

var noFieldMessage = regexp.MustCompile(`^type (.+) has no field (\S+)$`)

// rewrite replaces the Go spelling of made-up types in a message of the
// expression checker with their labels.
func (c *compiler) rewrite(msg string) string {
	known := c.madeUpTypes()
	if m := noFieldMessage.FindStringSubmatch(msg); m != nil {
		if t, ok := known[m[1]]; ok {
			return c.noField(t, m[2])
		}
	}
	// Longest first: a type's spelling holds its fields' types.
	spellings := slices.Collect(maps.Keys(known))
	sort.Slice(spellings, func(i, j int) bool { return len(spellings[i]) > len(spellings[j]) })
	for _, s := range spellings {
		msg = strings.ReplaceAll(msg, s, c.name(known[s]))
	}
	return msg
}

// madeUpTypes returns the made-up types expressions may see, by their Go
// spelling.
func (c *compiler) madeUpTypes() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		if t == nil {
			return
		}
		switch t.Kind() {
		case reflect.Slice, reflect.Array, reflect.Map, reflect.Pointer:
			walk(t.Elem())
		case reflect.Struct:
			if !isMadeUp(t) {
				return
			}
			if _, seen := out[t.String()]; seen {
				return
			}
			out[t.String()] = t
			for i := range t.NumField() {
				walk(t.Field(i).Type)
			}
		}
	}
	for t := range c.labels {
		walk(t)
	}
	if c.plan != nil {
		walk(c.plan.inputT)
		walk(c.plan.varsT)
	}
	return out
}

package flowdef

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// A manifest describes a catalog without its code: each step's name and
// the JSON Schemas of its input and output (derived from the Go types,
// fields named as in their JSON), the named compensations and the child
// workflows. A program writes it (Catalog.Manifest); tools that do not
// have the program's steps (`flowlite def validate --catalog`) read it
// back (CatalogFromManifest) to check definitions with the same types.
type manifest struct {
	Steps         []manifestEntry `json:"steps"`
	Compensations []manifestEntry `json:"compensations,omitempty"`
	Workflows     []manifestEntry `json:"workflows,omitempty"`
}

type manifestEntry struct {
	Name       string     `json:"name"`
	Version    int        `json:"version,omitempty"`
	Input      jsonSchema `json:"input"`
	Output     jsonSchema `json:"output"`
	Compensate bool       `json:"compensate,omitempty"`
}

// jsonSchema is the subset of JSON Schema that describes a step's types.
type jsonSchema struct {
	Type                 string                 `json:"type,omitempty"`
	Format               string                 `json:"format,omitempty"`
	Properties           map[string]*jsonSchema `json:"properties,omitempty"`
	Order                []string               `json:"x-order,omitempty"` // the properties in field order
	Items                *jsonSchema            `json:"items,omitempty"`
	AdditionalProperties any                    `json:"additionalProperties,omitempty"`
	// GoType is the Go type's name (OpenBatchInput) of a step's input or
	// output, so that messages from a manifest's catalog name it too.
	GoType string `json:"x-go-type,omitempty"`
}

// Manifest returns the catalog's manifest as JSON: what `flowlite def
// validate --catalog FILE` needs to check definitions against this
// catalog's types. Definitions added with AddDefinition are listed as
// workflows with their inputs and outputs.
func (c *Catalog) Manifest() ([]byte, error) {
	var m manifest
	for _, name := range c.StepNames() {
		s := c.steps[name]
		in, out := schemaOf(mirror(s.in)), schemaOf(mirror(s.out))
		in.GoType, out.GoType = s.inName, s.outName
		m.Steps = append(m.Steps, manifestEntry{Name: name, Input: in, Output: out, Compensate: s.hasComp})
	}
	names := make([]string, 0, len(c.comps))
	for n := range c.comps {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		e := c.comps[n]
		m.Compensations = append(m.Compensations, manifestEntry{Name: n, Input: schemaOf(mirror(e.in)), Output: schemaOf(mirror(e.out))})
	}
	wnames := make([]string, 0, len(c.workflows))
	for n := range c.workflows {
		wnames = append(wnames, n)
	}
	slices.Sort(wnames)
	for _, n := range wnames {
		for _, e := range c.workflows[n] {
			in, out := e.in, e.out
			if e.def != nil {
				in, out = e.def.plan.inputT, e.def.plan.outT
			} else {
				in, out = mirror(in), mirror(out)
			}
			m.Workflows = append(m.Workflows, manifestEntry{Name: n, Version: e.version, Input: schemaOf(in), Output: schemaOf(out)})
		}
	}
	return json.MarshalIndent(m, "", "  ")
}

// CatalogFromManifest builds a catalog from a manifest: its steps and
// workflows have the manifest's types but no code, so definitions compile
// against it (to be checked, drawn, stored) and never run.
func CatalogFromManifest(data []byte) (*Catalog, error) {
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("read catalog manifest: %w", err)
	}
	c := NewCatalog()
	for _, s := range m.Steps {
		if s.Name == "" {
			return nil, fmt.Errorf("read catalog manifest: a step has no name")
		}
		name := s.Name
		c.steps[name] = &stepEntry{
			name: name, in: typeOf(&s.Input), out: typeOf(&s.Output), hasComp: s.Compensate,
			inName: s.Input.GoType, outName: s.Output.GoType,
			run: func(flow.Context, []byte, overrides) ([]byte, error) {
				return nil, flow.Permanent(fmt.Errorf("step %s comes from a catalog manifest and cannot run", name))
			},
		}
	}
	for _, e := range m.Compensations {
		c.comps[e.Name] = &compEntry{name: e.Name, in: typeOf(&e.Input), out: typeOf(&e.Output)}
	}
	for _, w := range m.Workflows {
		if err := c.addWorkflow(&workflowEntry{name: w.Name, version: max(w.Version, 1), in: typeOf(&w.Input), out: typeOf(&w.Output)}); err != nil {
			return nil, fmt.Errorf("read catalog manifest: %w", err)
		}
	}
	return c, nil
}

// schemaOf describes a mirrored type.
func schemaOf(t reflect.Type) jsonSchema {
	switch {
	case t == nil || t == anyType || t.Kind() == reflect.Interface:
		return jsonSchema{}
	case t == timeType:
		return jsonSchema{Type: "string", Format: "date-time"}
	}
	switch t.Kind() {
	case reflect.Bool:
		return jsonSchema{Type: "boolean"}
	case reflect.String:
		return jsonSchema{Type: "string"}
	case reflect.Float32, reflect.Float64:
		return jsonSchema{Type: "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return jsonSchema{Type: "string", Format: "byte"}
		}
		items := schemaOf(t.Elem())
		return jsonSchema{Type: "array", Items: &items}
	case reflect.Map:
		v := schemaOf(t.Elem())
		return jsonSchema{Type: "object", AdditionalProperties: &v}
	case reflect.Struct:
		s := jsonSchema{Type: "object", Properties: map[string]*jsonSchema{}, AdditionalProperties: false}
		for i := range t.NumField() {
			f := t.Field(i)
			name := f.Tag.Get("expr")
			fs := schemaOf(f.Type)
			s.Properties[name] = &fs
			s.Order = append(s.Order, name)
		}
		return s
	}
	if isInt(t.Kind()) {
		return jsonSchema{Type: "integer"}
	}
	return jsonSchema{}
}

// typeOf builds a type with the shape s describes, as mirror would have
// made it.
func typeOf(s *jsonSchema) reflect.Type {
	if s == nil {
		return anyType
	}
	switch s.Type {
	case "boolean":
		return reflect.TypeFor[bool]()
	case "integer":
		return reflect.TypeFor[int]()
	case "number":
		return reflect.TypeFor[float64]()
	case "string":
		switch s.Format {
		case "date-time":
			return reflect.TypeFor[time.Time]()
		case "byte":
			return reflect.TypeFor[[]byte]()
		}
		return reflect.TypeFor[string]()
	case "array":
		return reflect.SliceOf(typeOf(s.Items))
	case "object":
		if s.Properties == nil {
			var elem *jsonSchema
			if m, ok := s.AdditionalProperties.(map[string]any); ok {
				b, _ := json.Marshal(m)
				elem = &jsonSchema{}
				_ = json.Unmarshal(b, elem)
			}
			return reflect.MapOf(reflect.TypeFor[string](), typeOf(elem))
		}
		order := s.Order
		if len(order) != len(s.Properties) {
			order = order[:0]
			for name := range s.Properties {
				order = append(order, name)
			}
			slices.Sort(order)
		}
		fields := make([]reflect.StructField, 0, len(order))
		for _, name := range order {
			p, ok := s.Properties[name]
			if !ok {
				continue
			}
			fields = append(fields, structField(len(fields), name, typeOf(p)))
		}
		return reflect.StructOf(fields)
	}
	return anyType
}

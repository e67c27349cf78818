package flowdef

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"
)

// declaredTypes are the types an input or variable may declare, with the
// Go type its values take in expressions.
var declaredTypes = map[string]reflect.Type{
	"string": reflect.TypeFor[string](),
	"int":    reflect.TypeFor[int](),
	"number": reflect.TypeFor[float64](),
	"bool":   reflect.TypeFor[bool](),
	"list":   reflect.TypeFor[[]any](),
	"object": reflect.TypeFor[map[string]any](),
	"any":    reflect.TypeFor[any](),
}

// TypeNames lists the types an input or variable may declare.
func TypeNames() string {
	names := make([]string, 0, len(declaredTypes))
	for n := range declaredTypes {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// convertDefault checks that v (plain data from the document) is a value of
// the declared type and returns it as that type.
func convertDefault(typ string, v any) (any, error) {
	t, ok := declaredTypes[typ]
	if !ok {
		return nil, fmt.Errorf("unknown type %q", typ)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if typ == "int" {
		if f, ok := v.(float64); ok && f != math.Trunc(f) {
			return nil, fmt.Errorf("%v is not an int", v)
		}
	}
	p := reflect.New(t)
	if err := json.Unmarshal(b, p.Interface()); err != nil {
		return nil, fmt.Errorf("%s is not a value of type %s", b, typ)
	}
	return p.Elem().Interface(), nil
}

var (
	anyType       = reflect.TypeFor[any]()
	timeType      = reflect.TypeFor[time.Time]()
	jsonUnmarshal = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshal = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// mirror returns the type expressions see for values of t: the same shape,
// with struct fields named as in t's JSON encoding (through expr tags) so
// that a definition names fields the way the stored JSON does. Values are
// moved between t and its mirror through JSON. Types with their own JSON
// encoding are kept (time.Time, say); a type that refers to itself becomes
// any where it recurs.
func mirror(t reflect.Type) reflect.Type {
	return mirrorOf(t, map[reflect.Type]bool{})
}

func mirrorOf(t reflect.Type, visiting map[reflect.Type]bool) reflect.Type {
	if t == nil {
		return anyType
	}
	if t == timeType {
		return t
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshal) || reflect.PointerTo(t).Implements(textUnmarshal) {
		return anyType // its JSON has a shape of its own
	}
	switch t.Kind() {
	case reflect.Pointer:
		return mirrorOf(t.Elem(), visiting)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return t // []byte is a base64 string
		}
		return reflect.SliceOf(mirrorOf(t.Elem(), visiting))
	case reflect.Array:
		return reflect.SliceOf(mirrorOf(t.Elem(), visiting))
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return reflect.MapOf(reflect.TypeFor[string](), mirrorOf(t.Elem(), visiting))
		}
		return reflect.MapOf(reflect.TypeFor[string](), mirrorOf(t.Elem(), visiting))
	case reflect.Struct:
		if visiting[t] {
			return anyType
		}
		visiting[t] = true
		defer delete(visiting, t)
		var fields []reflect.StructField
		seen := map[string]bool{}
		collectFields(t, visiting, &fields, seen)
		return reflect.StructOf(fields)
	case reflect.Interface:
		return anyType
	case reflect.Chan, reflect.Func, reflect.UnsafePointer, reflect.Complex64, reflect.Complex128:
		return anyType
	}
	// Basic kinds: named types (type Cents int) become their kind so that
	// expressions compare them with literals.
	return basicType(t.Kind())
}

func basicType(k reflect.Kind) reflect.Type {
	switch k {
	case reflect.Bool:
		return reflect.TypeFor[bool]()
	case reflect.String:
		return reflect.TypeFor[string]()
	case reflect.Float32, reflect.Float64:
		return reflect.TypeFor[float64]()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return reflect.TypeFor[uint64]()
	default:
		return reflect.TypeFor[int]()
	}
}

// collectFields adds the JSON fields of struct t, flattening embedded
// structs as encoding/json does.
func collectFields(t reflect.Type, visiting map[reflect.Type]bool, out *[]reflect.StructField, seen map[string]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				collectFields(ft, visiting, out, seen)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		ft := mirrorOf(f.Type, visiting)
		if strings.Contains(opts, "string") {
			ft = reflect.TypeFor[string]()
		}
		*out = append(*out, structField(len(*out), name, ft))
	}
}

// structField is field number i of a made-up struct, named name in JSON
// and in expressions.
func structField(i int, name string, t reflect.Type) reflect.StructField {
	return reflect.StructField{
		Name: fmt.Sprintf("F%d", i),
		Type: t,
		Tag:  reflect.StructTag(fmt.Sprintf(`json:%q expr:%q`, name, name)),
	}
}

// fieldsOf returns the fields of a made-up struct type by JSON name.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		out[f.Tag.Get("expr")] = f.Type
	}
	return out
}

// isMadeUp reports whether t is a struct built by mirror or structOf.
func isMadeUp(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && t.Name() == ""
}

// compatible reports whether a value of type got (an expression's result)
// can be passed where want is expected once encoded as JSON, and if not,
// why. Unknown types (any) are accepted here and checked when the run
// decodes the value.
func compatible(got, want reflect.Type) (bool, string) {
	if got == nil || want == nil || got == anyType || want == anyType || got.Kind() == reflect.Interface || want.Kind() == reflect.Interface {
		return true, ""
	}
	if got == want || got.AssignableTo(want) {
		return true, ""
	}
	gk, wk := got.Kind(), want.Kind()
	switch {
	case isInt(gk) && (isInt(wk) || isFloat(wk)):
		return true, ""
	case isFloat(gk) && isFloat(wk):
		return true, ""
	case isFloat(gk) && isInt(wk):
		return false, "a float where an integer is expected (use int())"
	case gk == reflect.Struct && want == timeType, want.Kind() == reflect.Struct && got == timeType:
		return false, fmt.Sprintf("%s where %s is expected", describe(got), describe(want))
	case want == timeType && gk == reflect.String, gk == reflect.String && wk == reflect.String:
		return true, ""
	case (gk == reflect.Slice || gk == reflect.Array) && wk == reflect.Slice:
		if ok, why := compatible(got.Elem(), want.Elem()); !ok {
			return false, "list element: " + why
		}
		return true, ""
	case gk == reflect.Map && wk == reflect.Map:
		if ok, why := compatible(got.Elem(), want.Elem()); !ok {
			return false, "map value: " + why
		}
		return true, ""
	case gk == reflect.Map && wk == reflect.Struct:
		return true, "" // keys are known at run time only
	case gk == reflect.Struct && wk == reflect.Map:
		for name, ft := range fieldsOf(got) {
			if ok, why := compatible(ft, want.Elem()); !ok {
				return false, fmt.Sprintf("field %s: %s", name, why)
			}
		}
		return true, ""
	case gk == reflect.Struct && wk == reflect.Struct && isMadeUp(got) && isMadeUp(want):
		wf := fieldsOf(want)
		for name, ft := range fieldsOf(got) {
			wt, ok := wf[name]
			if !ok {
				return false, fmt.Sprintf("field %s is not a field of %s", name, describe(want))
			}
			if ok, why := compatible(ft, wt); !ok {
				return false, fmt.Sprintf("field %s: %s", name, why)
			}
		}
		return true, ""
	}
	return false, fmt.Sprintf("%s where %s is expected", describe(got), describe(want))
}

func isInt(k reflect.Kind) bool {
	return k >= reflect.Int && k <= reflect.Uintptr
}

func isFloat(k reflect.Kind) bool { return k == reflect.Float32 || k == reflect.Float64 }

// describe names a type the way a definition's author knows it: JSON
// names for made-up structs.
func describe(t reflect.Type) string {
	if t == nil {
		return "any"
	}
	switch {
	case t == anyType:
		return "any"
	case t == timeType:
		return "time"
	case isMadeUp(t):
		names := make([]string, 0, t.NumField())
		for i := range t.NumField() {
			f := t.Field(i)
			names = append(names, f.Tag.Get("expr")+": "+describe(f.Type))
		}
		return "{" + strings.Join(names, ", ") + "}"
	case t.Kind() == reflect.Slice:
		return "list of " + describe(t.Elem())
	case t.Kind() == reflect.Map:
		return "map of " + describe(t.Elem())
	case isInt(t.Kind()):
		return "int"
	case isFloat(t.Kind()):
		return "number"
	}
	return t.String()
}

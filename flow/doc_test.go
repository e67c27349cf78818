package flow_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAPIHidesNoInternalTypes keeps the public API readable with go doc.
// go doc and pkg.go.dev show an alias of an internal type as a bare
// "type X = engine.Y" and do not follow it, so a user cannot read its
// fields. Types of the API are defined in flow/flowtype instead. The test
// parses flow and its public subpackages and fails on an exported alias of
// an internal type, and on an internal type in an exported field or an
// exported function's signature.
//
// One exception is deliberate: Backend's method returns internal/store's
// Opened. That is what seals the seam: no package outside this module can
// name the type, so only flowlite's own backend packages (flow/flowsqlite
// and flow/flowpg) can implement Backend, and users choose a backend by
// importing its package, never by writing one. sealedSeam lists it; a new
// entry needs the same reason.
func TestAPIHidesNoInternalTypes(t *testing.T) {
	fset := token.NewFileSet()
	var files int
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, problem := range checkFile(fset, f) {
			if !sealedSeam(problem) {
				t.Error(problem)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("no Go files found; the test must run in the flow directory")
	}
}

// sealedSeam reports whether problem is about the sealed Backend seam, the
// one internal type flow's API shows on purpose (see above).
func sealedSeam(problem string) bool {
	return strings.Contains(problem, " Backend.OpenStore uses github.com/flowlite/flowlite/internal/store.Opened;")
}

// TestAPICheckFindsInternalTypes makes sure the check above would catch
// what it guards against.
func TestAPICheckFindsInternalTypes(t *testing.T) {
	const src = `package flow

import (
	"context"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
	st "github.com/flowlite/flowlite/internal/store"
)

type RetryPolicy = engine.RetryPolicy     // bad: alias of an internal type
type Policies = map[string]st.CatchUp     // bad: alias mentioning one
type Fine = flowtype.RetryPolicy          // fine
type hidden = engine.RetryPolicy          // fine: not exported
type Config struct {
	Retry  engine.RetryPolicy             // bad: exported field
	Clock  flowtype.Clock                 // fine
	store  st.Store                       // fine: unexported
}
func Do(ctx context.Context, p engine.RetryPolicy) {} // bad: signature
func do(p engine.RetryPolicy)                       {} // fine: unexported
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "bad.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	problems := checkFile(fset, f)
	want := []string{"alias RetryPolicy", "alias Policies", "Config.Retry", "func Do"}
	if len(problems) != len(want) {
		t.Fatalf("got %d problems, want %d (%v):\n%s", len(problems), len(want), want, strings.Join(problems, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(problems[i], " "+w+" uses ") {
			t.Errorf("problem %d = %q, want one about %s", i, problems[i], w)
		}
	}
}

// checkFile returns the internal types f exposes in exported declarations.
func checkFile(fset *token.FileSet, f *ast.File) (problems []string) {
	internal := map[string]string{} // local import name → path, internal packages only
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if !strings.Contains(path, "/internal/") {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		internal[name] = path
	}
	if len(internal) == 0 {
		return nil
	}
	// report fails for every selector of an internal package in expr.
	report := func(what string, expr ast.Expr) {
		ast.Inspect(expr, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok {
				if path, ok := internal[id.Name]; ok {
					problems = append(problems, fmt.Sprintf("%s: %s uses %s.%s; define the type in flow/flowtype (with doc comments) and alias that instead",
						fset.Position(sel.Pos()), what, path, sel.Sel.Name))
				}
			}
			return false
		})
	}
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.GenDecl:
			if decl.Tok != token.TYPE {
				continue
			}
			for _, spec := range decl.Specs {
				ts := spec.(*ast.TypeSpec)
				if !ts.Name.IsExported() {
					continue
				}
				if ts.Assign.IsValid() {
					report("alias "+ts.Name.Name, ts.Type)
					continue
				}
				checkFields(ts.Name.Name, ts.Type, report)
			}
		case *ast.FuncDecl:
			if !decl.Name.IsExported() || !exportedReceiver(decl) {
				continue
			}
			report("func "+decl.Name.Name, decl.Type)
		}
	}
	return problems
}

// checkFields reports the exported fields of a struct type, and the methods
// of an interface type, whose types name an internal package.
func checkFields(typeName string, typ ast.Expr, report func(string, ast.Expr)) {
	var list *ast.FieldList
	switch typ := typ.(type) {
	case *ast.StructType:
		list = typ.Fields
	case *ast.InterfaceType:
		list = typ.Methods
	default:
		report("type "+typeName, typ)
		return
	}
	for _, field := range list.List {
		if len(field.Names) == 0 { // embedded
			report("embedded field of "+typeName, field.Type)
			continue
		}
		for _, name := range field.Names {
			if name.IsExported() {
				report(typeName+"."+name.Name, field.Type)
			}
		}
	}
}

// exportedReceiver reports whether fn is a function, or a method of an
// exported type.
func exportedReceiver(fn *ast.FuncDecl) bool {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return true
	}
	typ := fn.Recv.List[0].Type
	for {
		switch t := typ.(type) {
		case *ast.StarExpr:
			typ = t.X
		case *ast.IndexExpr:
			typ = t.X
		case *ast.IndexListExpr:
			typ = t.X
		case *ast.Ident:
			return t.IsExported()
		default:
			return true
		}
	}
}

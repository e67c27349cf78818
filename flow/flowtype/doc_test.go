package flowtype_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// parsePackage parses the package's non-test files.
func parsePackage(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatal("no Go files found; the test must run in the flowtype directory")
	}
	return fset, files
}

// TestEverythingDocumented enforces the point of the package: go doc must
// show what every type, field, method, constant and variable is for.
func TestEverythingDocumented(t *testing.T) {
	fset, files := parsePackage(t)
	pkg, err := doc.NewFromFiles(fset, files, "github.com/flowlite/flowlite/flow/flowtype")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(pkg.Doc) == "" {
		t.Error("package has no doc comment")
	}
	missing := func(pos token.Pos, what string) {
		t.Errorf("%s: %s has no doc comment", fset.Position(pos), what)
	}
	checkValues := func(values []*doc.Value) {
		for _, v := range values {
			if strings.TrimSpace(v.Doc) == "" {
				missing(v.Decl.Pos(), "group of "+strings.Join(v.Names, ", "))
			}
			// Each name of a group needs its own comment too: the group's
			// only says what they have in common.
			for _, spec := range v.Decl.Specs {
				vs := spec.(*ast.ValueSpec)
				for _, name := range vs.Names {
					if name.IsExported() && vs.Doc.Text() == "" && vs.Comment.Text() == "" {
						missing(name.Pos(), name.Name)
					}
				}
			}
		}
	}
	checkFuncs := func(funcs []*doc.Func) {
		for _, f := range funcs {
			name := f.Name
			if f.Recv != "" {
				name = strings.TrimPrefix(f.Recv, "*") + "." + f.Name
			}
			if strings.TrimSpace(f.Doc) == "" {
				missing(f.Decl.Pos(), name)
			}
		}
	}
	checkValues(pkg.Consts)
	checkValues(pkg.Vars)
	checkFuncs(pkg.Funcs)
	if len(pkg.Types) == 0 {
		t.Fatal("no exported types found")
	}
	for _, typ := range pkg.Types {
		if strings.TrimSpace(typ.Doc) == "" {
			missing(typ.Decl.Pos(), "type "+typ.Name)
		}
		checkValues(typ.Consts)
		checkValues(typ.Vars)
		checkFuncs(typ.Funcs)
		checkFuncs(typ.Methods)
		for _, spec := range typ.Decl.Specs {
			ts := spec.(*ast.TypeSpec)
			var list *ast.FieldList
			switch x := ts.Type.(type) {
			case *ast.StructType:
				list = x.Fields
			case *ast.InterfaceType:
				list = x.Methods
			}
			if list == nil {
				continue
			}
			for _, field := range list.List {
				for _, name := range field.Names {
					if name.IsExported() && field.Doc.Text() == "" && field.Comment.Text() == "" {
						missing(name.Pos(), typ.Name+"."+name.Name)
					}
				}
			}
		}
	}
}

// TestLeaf keeps flowtype a leaf: the engine's internal packages import it,
// so importing anything of flowlite (or beyond the standard library) could
// make a cycle or drag dependencies into every user of the types.
func TestLeaf(t *testing.T) {
	fset, files := parsePackage(t)
	for _, f := range files {
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			if strings.Contains(first, ".") {
				t.Errorf("%s: flowtype imports %s; it may import the standard library only",
					fset.Position(imp.Pos()), path)
			}
		}
	}
}

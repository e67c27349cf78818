package defgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// goPackage is the type-checked Go package a definition is generated
// into: where its step types' fields are looked up.
type goPackage struct {
	pkg  *types.Package
	dir  string  // as the caller named it, for messages
	errs []error // type errors, kept to explain a type that is missing
}

// loadPackage type-checks the Go package in dir, leaving out the file
// generated earlier from the same definition (header genHeader): that file
// is about to be replaced and may no longer agree with the package.
//
// Imported packages come from the export data the go command builds
// (go list -export), which the build cache keeps: type-checking the
// imports from source instead takes seconds for a program that links a
// database driver.
func loadPackage(dir, genHeader string) (*goPackage, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	bp, err := build.Default.ImportDir(abs, 0)
	if err != nil {
		return nil, fmt.Errorf("find the Go files in %s: %w", dir, err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	imports := map[string]bool{}
	for _, name := range bp.GoFiles {
		path := filepath.Join(abs, name)
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if bytes.HasPrefix(src, []byte(genHeader)) {
			continue
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", path, err)
		}
		files = append(files, f)
		for _, spec := range f.Imports {
			if p, err := strconv.Unquote(spec.Path.Value); err == nil && p != "C" {
				imports[p] = true
			}
		}
	}
	exports, err := exportData(abs, imports)
	if err != nil {
		return nil, err
	}
	lookup := func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	}
	gp := &goPackage{dir: dir}
	conf := types.Config{
		Importer: importer.ForCompiler(fset, "gc", lookup),
		// A package that does not compile today (a step changed while the
		// definition was being edited) still declares its step types;
		// whether they fit the definition is what the caller reports.
		Error: func(err error) { gp.errs = append(gp.errs, err) },
	}
	gp.pkg, _ = conf.Check(bp.ImportPath, fset, files, nil)
	if gp.pkg == nil {
		return nil, fmt.Errorf("type-check %s: %w", dir, errors.Join(gp.errs...))
	}
	return gp, nil
}

// exportData asks the go command, in dir's module, for the export data
// files of the packages imports names.
func exportData(dir string, imports map[string]bool) (map[string]string, error) {
	out := map[string]string{}
	if len(imports) == 0 {
		return out, nil
	}
	args := []string{"list", "-e", "-export", "-f", "{{.ImportPath}}\t{{.Export}}"}
	args = append(args, slices.Sorted(maps.Keys(imports))...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list the imports of %s: %w\n%s", dir, err, stderr.Bytes())
	}
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	for sc.Scan() {
		path, file, _ := strings.Cut(sc.Text(), "\t")
		if file == "" {
			// An import that does not build: the type checker reports it
			// where it is used.
			continue
		}
		out[path] = file
	}
	return out, sc.Err()
}

// jsonFields returns the fields of the struct named name in the package,
// by the name encoding/json gives them, each as the Go selector that
// reaches it ("Dataset", "Base.ID" for a field of an embedded struct).
// It flattens embedded structs as flowdef's catalog does, so that the
// names agree with the ones the definition is checked against.
func (gp *goPackage) jsonFields(name string) (map[string]string, error) {
	obj, ok := gp.pkg.Scope().Lookup(name).(*types.TypeName)
	if !ok {
		err := fmt.Errorf("the Go package in %s declares no type %s", gp.dir, name)
		if len(gp.errs) > 0 {
			err = fmt.Errorf("%w (it does not type-check: %v)", err, gp.errs[0])
		}
		return nil, err
	}
	st, ok := obj.Type().Underlying().(*types.Struct)
	if !ok {
		return nil, fmt.Errorf("%s is %s, not a struct", name, obj.Type().Underlying())
	}
	out := map[string]string{}
	collectGoFields(st, "", map[*types.Struct]bool{}, out)
	return out, nil
}

// collectGoFields mirrors flowdef's collectFields over go/types: the first
// field to claim a JSON name keeps it.
func collectGoFields(st *types.Struct, prefix string, visiting map[*types.Struct]bool, out map[string]string) {
	if visiting[st] {
		return
	}
	visiting[st] = true
	defer delete(visiting, st)
	for i := range st.NumFields() {
		f := st.Field(i)
		name, opts, _ := strings.Cut(reflect.StructTag(st.Tag(i)).Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Embedded() && name == "" {
			t := f.Type()
			if p, ok := t.Underlying().(*types.Pointer); ok {
				t = p.Elem()
			}
			if inner, ok := t.Underlying().(*types.Struct); ok {
				collectGoFields(inner, prefix+f.Name()+".", visiting, out)
				continue
			}
		}
		if !f.Exported() {
			continue
		}
		if name == "" {
			name = f.Name()
		}
		if _, seen := out[name]; seen {
			continue
		}
		out[name] = prefix + f.Name()
	}
}

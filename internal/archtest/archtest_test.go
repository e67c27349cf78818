package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// module is the path of flowlite's module; every rule speaks of its
// packages relative to it.
const module = "github.com/flowlite/flowlite"

// pkg is what go list reports about one package. Imports and Deps are the
// imports of its non-test files (Deps transitively); test files may cross
// boundaries that the code may not, e.g. the engine's tests open a SQLite
// store.
type pkg struct {
	ImportPath   string
	Standard     bool
	Imports      []string
	Deps         []string
	TestImports  []string
	XTestImports []string
}

var (
	loadOnce sync.Once
	loaded   map[string]*pkg
	loadErr  error
)

// packages lists the module's packages and everything they import, once
// per test binary.
func packages(t *testing.T) map[string]*pkg {
	t.Helper()
	loadOnce.Do(func() {
		cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard,Imports,Deps,TestImports,XTestImports", module+"/...")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			loadErr = errors.New("go list: " + err.Error() + ": " + stderr.String())
			return
		}
		loaded = make(map[string]*pkg)
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p pkg
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				loadErr = err
				return
			}
			loaded[p.ImportPath] = &p
		}
	})
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return loaded
}

// under returns the module's packages at dir (relative to the module) or
// below it, sorted, and fails the test when there is none: a rule that
// matches nothing after a rename would pass without checking anything.
func under(t *testing.T, pkgs map[string]*pkg, dir string) []*pkg {
	t.Helper()
	root := module + "/" + dir
	var out []*pkg
	for path, p := range pkgs {
		if path == root || strings.HasPrefix(path, root+"/") {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no package at %s: update the rule to the new layout", dir)
	}
	slices.SortFunc(out, func(a, b *pkg) int { return strings.Compare(a.ImportPath, b.ImportPath) })
	return out
}

// rel shortens a path of the module for messages.
func rel(path string) string {
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r
	}
	return path
}

// isAdapter reports whether path is a store adapter: a package below
// internal/store other than the conformance suite.
func isAdapter(path string) bool {
	r, ok := strings.CutPrefix(path, module+"/internal/store/")
	return ok && r != "storetest" && !strings.HasPrefix(r, "storetest/")
}

// isDBGen reports whether path is generated database code.
func isDBGen(path string) bool {
	return path == module+"/dbgen" || strings.HasPrefix(path, module+"/dbgen/")
}

// isDriver reports whether path belongs to a database driver.
func isDriver(path string) bool {
	for _, prefix := range []string{"modernc.org/sqlite", "github.com/jackc/pgx", "github.com/jackc/pgconn"} {
		if path == prefix || strings.HasPrefix(path, prefix+"/") {
			return true
		}
	}
	return false
}

// chain returns how from reaches to through non-test imports, as
// "a → b → c", for messages about transitive imports.
func chain(pkgs map[string]*pkg, from, to string) string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var path []string
			for p := to; p != ""; p = prev[p] {
				path = append(path, rel(p))
			}
			slices.Reverse(path)
			return strings.Join(path, " → ")
		}
		p := pkgs[cur]
		if p == nil {
			continue
		}
		for _, imp := range p.Imports {
			if _, seen := prev[imp]; !seen {
				prev[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return rel(from) + " → … → " + rel(to)
}

// allowOnly fails for every non-test import of the packages at dir that is
// neither in the standard library nor one of allowed (paths relative to the
// module).
func allowOnly(t *testing.T, dir string, allowed ...string) {
	t.Helper()
	pkgs := packages(t)
	for _, p := range under(t, pkgs, dir) {
		for _, imp := range p.Imports {
			if dep := pkgs[imp]; dep != nil && dep.Standard {
				continue
			}
			if slices.Contains(allowed, rel(imp)) {
				continue
			}
			t.Errorf("%s imports %s; it may import only the standard library and %v", rel(p.ImportPath), imp, allowed)
		}
	}
}

// The engine is store-agnostic: it sees the database only through the
// internal/store interfaces. So a second adapter (PostgreSQL) needs no
// engine change, and no SQL dialect, generated query code or driver can
// creep into it. The check is transitive, through any package in between;
// only the engine's tests may open an adapter.
func TestEngineImportsNoAdapter(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	for _, p := range under(t, pkgs, "internal/engine") {
		for _, dep := range p.Deps {
			if isAdapter(dep) || isDBGen(dep) || isDriver(dep) {
				t.Errorf("%s imports %s (%s): the engine reaches the database only through internal/store",
					rel(p.ImportPath), dep, chain(pkgs, p.ImportPath, dep))
			}
		}
	}
}

// internal/store is the seam every adapter implements and the engine
// consumes: if it imported an adapter, a driver or the engine, the seam
// would carry one database's (or the engine's) vocabulary into the other
// side. Its record types that users see are defined in flow/flowtype.
func TestStoreImportsOnlyStdAndFlowtype(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	p := pkgs[module+"/internal/store"]
	if p == nil {
		t.Fatal("no package internal/store: update the rule to the new layout")
	}
	for _, imp := range p.Imports {
		if dep := pkgs[imp]; (dep != nil && dep.Standard) || imp == module+"/flow/flowtype" {
			continue
		}
		t.Errorf("internal/store imports %s; the seam may import only the standard library and flow/flowtype", imp)
	}
}

// flow/flowtype is the leaf of public types that both flow and the
// internal packages use (as rivertype is for River); anything it imported
// would be imported by every package of the project, and its go doc would
// point into packages users cannot read.
func TestFlowtypeImportsOnlyStd(t *testing.T) {
	t.Parallel()
	allowOnly(t, "flow/flowtype")
}

// dbgen holds sqlc's output for one dialect per package. Only the adapter
// of that dialect may use it (tests included), so the generated row types
// and query names never become the vocabulary of the engine, flow or the
// CLI, and a schema change touches one adapter only.
func TestDBGenOnlyInAdapters(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	var paths []string
	for path := range pkgs {
		if strings.HasPrefix(path, module+"/") {
			paths = append(paths, path)
		}
	}
	slices.Sort(paths)
	for _, path := range paths {
		if isAdapter(path) || isDBGen(path) {
			continue
		}
		p := pkgs[path]
		for _, imps := range [][]string{p.Imports, p.TestImports, p.XTestImports} {
			for _, imp := range imps {
				if isDBGen(imp) {
					t.Errorf("%s imports %s; only store adapters (internal/store/<adapter>) may import dbgen", rel(path), imp)
				}
			}
		}
	}
}

// steps are ready-made steps a user could have written: built only on
// flow's public API, they prove that API is enough and stay usable with
// any store.
func TestStepsImportOnlyFlow(t *testing.T) {
	t.Parallel()
	allowOnly(t, "steps", "flow")
}

// The dashboard (and flow/flowui, its public face) is a client of flow's public API, like any user program:
// it must not reach into the engine or a store adapter, whose internals it
// would then depend on. (flow itself uses the engine, so this rule is on
// the dashboard's own imports.)
func TestDashboardImportsNoEngine(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	var ps []*pkg
	for _, dir := range []string{"internal/dashboard", "flow/flowui", "flow/flowprom"} {
		ps = append(ps, under(t, pkgs, dir)...)
	}
	for _, p := range ps {
		for _, imp := range p.Imports {
			engine := imp == module+"/internal/engine" || strings.HasPrefix(imp, module+"/internal/engine/")
			if engine || isAdapter(imp) || isDBGen(imp) || isDriver(imp) {
				t.Errorf("%s imports %s; the dashboard works through flow's public API only", rel(p.ImportPath), imp)
			}
		}
	}
}

// flow is the backend-neutral API: a program chooses its backend by
// importing flow/flowsqlite (or, later, flow/flowpg), so flow itself must
// reach no store adapter and no database driver, even transitively, or
// every program would link every backend.
func TestFlowImportsNoBackend(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	p := pkgs[module+"/flow"]
	if p == nil {
		t.Fatal("no package flow: update the rule to the new layout")
	}
	for _, dep := range p.Deps {
		if isAdapter(dep) || isDBGen(dep) || isDriver(dep) {
			t.Errorf("flow imports %s (%s): flow reaches a database only through a Backend that a backend package (flow/flowsqlite) hands it",
				dep, chain(pkgs, p.ImportPath, dep))
		}
	}
}

// SQLite is one room: only its adapter and its public backend package may
// import the SQLite driver, so that SQLite's error codes, pragmas and DSNs
// cannot leak into the engine, flow or the CLI. Tests may open a file
// directly.
func TestOnlySQLiteBackendImportsSQLiteDriver(t *testing.T) {
	t.Parallel()
	allowed := []string{module + "/internal/store/sqlitestore", module + "/flow/flowsqlite"}
	pkgs := packages(t)
	for path, p := range pkgs {
		if !strings.HasPrefix(path, module+"/") || slices.Contains(allowed, path) {
			continue
		}
		for _, imp := range p.Imports {
			if imp == "modernc.org/sqlite" || strings.HasPrefix(imp, "modernc.org/sqlite/") {
				t.Errorf("%s imports %s; only %v may import the SQLite driver", rel(path), imp, allowed)
			}
		}
	}
}

// The CLI is an operator of flow's API: it reads and migrates a database's
// schema through its backend package (flowsqlite.Inspect, flowpg.Inspect)
// and speaks flow's sentinels, never SQLite's result codes, so it imports
// no driver itself.
func TestCLIImportsNoDriver(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	for _, p := range under(t, pkgs, "cmd/flowlite") {
		for _, imp := range p.Imports {
			if isDriver(imp) || isDBGen(imp) {
				t.Errorf("%s imports %s; the CLI reaches the database through flow and its backend packages", rel(p.ImportPath), imp)
			}
		}
	}
}

// The CLI chooses its backend once: it imports no store adapter, only the
// public backend packages, and those in one file (cmd/flowlite/backend.go),
// which opens what --db names; every other file speaks to flow.Engine.
// (internal/store/storecopy, which copies one adapter's store into the
// other's, is the CLI's one way to both, also from that file alone.)
func TestCLIChoosesItsBackendOnce(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	for _, p := range under(t, pkgs, "cmd/flowlite") {
		for _, imp := range p.Imports {
			if isAdapter(imp) && imp != module+"/internal/store/storecopy" {
				t.Errorf("%s imports %s; the CLI opens its backend through flow/flowsqlite or flow/flowpg", rel(p.ImportPath), imp)
			}
		}
	}
	backendOnly := []string{module + "/flow/flowsqlite", module + "/flow/flowpg", module + "/internal/store/storecopy"}
	files, err := filepath.Glob("../../cmd/flowlite/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files at cmd/flowlite (%v): update the rule to the new layout", err)
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") || filepath.Base(file) == "backend.go" {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range f.Imports {
			if imp, _ := strconv.Unquote(spec.Path.Value); slices.Contains(backendOnly, imp) {
				t.Errorf("cmd/flowlite/%s imports %s; only backend.go may, the rest of the CLI speaks to flow.Engine", filepath.Base(file), imp)
			}
		}
	}
}

// flow/flowprom and the dashboard expose the same metric families, which
// both take from internal/metrics: the collector must not build on the
// dashboard (its templates, handlers and pages) to get them.
func TestFlowpromImportsNoDashboard(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	for _, p := range under(t, pkgs, "flow/flowprom") {
		for _, dep := range p.Deps {
			if dep == module+"/internal/dashboard" || strings.HasPrefix(dep, module+"/internal/dashboard/") {
				t.Errorf("%s imports %s (%s); the metric families live in internal/metrics", rel(p.ImportPath), rel(dep), chain(pkgs, p.ImportPath, dep))
			}
		}
	}
}

// pgx is the PostgreSQL adapter's driver, as modernc is SQLite's: only the
// adapter (internal/store/pgstore, tests included) and the public package
// that will open a PostgreSQL-backed engine (flow/flowpg) may import it, or
// the PostgreSQL-only generated queries in dbgen/pgdb. Anything else would
// make a SQLite-only program link a PostgreSQL driver, or carry pgx's
// types across the store seam.
func TestPgxOnlyInPostgresAdapter(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	under(t, pkgs, "internal/store/pgstore") // the rule must match something
	allowed := func(path string) bool {
		for _, dir := range []string{"internal/store/pgstore", "flow/flowpg"} {
			root := module + "/" + dir
			if path == root || strings.HasPrefix(path, root+"/") {
				return true
			}
		}
		return false
	}
	pgx := func(imp string) bool {
		return imp == "github.com/jackc/pgx" || strings.HasPrefix(imp, "github.com/jackc/pgx/") ||
			imp == "github.com/jackc/pgconn" || strings.HasPrefix(imp, "github.com/jackc/pgconn/")
	}
	var paths []string
	for path := range pkgs {
		if strings.HasPrefix(path, module+"/") {
			paths = append(paths, path)
		}
	}
	slices.Sort(paths)
	for _, path := range paths {
		p := pkgs[path]
		for _, imps := range [][]string{p.Imports, p.TestImports, p.XTestImports} {
			for _, imp := range imps {
				switch {
				case pgx(imp) && !allowed(path):
					t.Errorf("%s imports %s; only internal/store/pgstore and flow/flowpg may import pgx", rel(path), imp)
				case imp == module+"/dbgen/pgdb" && path != module+"/internal/store/pgstore":
					t.Errorf("%s imports dbgen/pgdb; only internal/store/pgstore may", rel(path))
				}
			}
		}
	}
}

// A program links only the backend it imports: a SQLite-only program (one
// importing flow/flowsqlite, as every example does) reaches no part of
// PostgreSQL, not pgx, nor its adapter or generated queries, even
// transitively; and one importing flow/flowpg links no SQLite. Import
// rules on direct imports alone would let a shared package carry a driver
// into both.
func TestBackendsLinkOnlyTheirDriver(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	postgres := func(dep string) bool {
		return strings.HasPrefix(dep, "github.com/jackc/") ||
			dep == module+"/internal/store/pgstore" || dep == module+"/dbgen/pgdb"
	}
	sqlite := func(dep string) bool {
		return dep == "modernc.org/sqlite" || strings.HasPrefix(dep, "modernc.org/sqlite/") ||
			dep == module+"/internal/store/sqlitestore" || dep == module+"/dbgen/sqlitedb"
	}
	check := func(path string, forbidden func(string) bool, what string) {
		t.Helper()
		p := pkgs[path]
		if p == nil {
			t.Fatalf("no package %s: update the rule to the new layout", rel(path))
		}
		for _, dep := range p.Deps {
			if forbidden(dep) {
				t.Errorf("%s links %s (%s): a program importing it would link %s", rel(path), dep, chain(pkgs, path, dep), what)
			}
		}
	}
	check(module+"/flow/flowsqlite", postgres, "PostgreSQL")
	check(module+"/flow/flowpg", sqlite, "SQLite")
	examples := under(t, pkgs, "examples")
	for _, p := range examples {
		check(p.ImportPath, postgres, "PostgreSQL")
	}
}

// Replication is opt-in: flow/flowsqlite, which every SQLite program
// imports, links no Litestream, which brings net/http and net/http/pprof
// (whose init registers /debug/pprof on http.DefaultServeMux) and
// Prometheus' default registry into a program. Only flow/flowlitestream
// (and what imports it) may.
func TestSQLiteBackendLinksNoLitestream(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	for _, path := range []string{module + "/flow/flowsqlite", module + "/internal/store/sqlitestore"} {
		p := pkgs[path]
		if p == nil {
			t.Fatalf("no package %s: update the rule to the new layout", rel(path))
		}
		for _, dep := range p.Deps {
			if dep == "github.com/benbjohnson/litestream" || strings.HasPrefix(dep, "github.com/benbjohnson/litestream/") || dep == "net/http/pprof" {
				t.Errorf("%s links %s (%s): a program that does not replicate would link Litestream", rel(path), dep, chain(pkgs, path, dep))
			}
		}
	}
}

// Inside internal/, each concept has one name: no declaration aliases a
// type of another package (or of its own) under a second name. Public
// names live in flow/flowtype, and internal code uses them as they are.
func TestInternalDeclaresNoTypeAliases(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../internal/*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("../../internal/*/*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, more...)
	if len(files) < 50 {
		t.Fatalf("only %d Go files under internal/: update the rule to the new layout", len(files))
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				if ts := s.(*ast.TypeSpec); ts.Assign.IsValid() {
					t.Errorf("%s: type %s is an alias; use the aliased type under its own name", fset.Position(ts.Pos()), ts.Name.Name)
				}
			}
		}
	}
}

// Routing between the engines of a shard set is flow/route.go's alone: no
// other file of package flow reaches into the router's engines or a
// shard's place in its set.
func TestShardRoutingInOneFile(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../flow/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files at flow (%v)", err)
	}
	fset := token.NewFileSet()
	for _, file := range files {
		base := filepath.Base(file)
		if strings.HasSuffix(base, "_test.go") || base == "route.go" || base == "shard.go" {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && (sel.Sel.Name == "engines" || sel.Sel.Name == "place") {
				t.Errorf("%s: .%s belongs to the router; route through flow/route.go's helpers", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}

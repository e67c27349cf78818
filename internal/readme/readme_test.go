package readme

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// root is the repository root, from this package's directory.
const root = "../.."

// maxREADMELines is how long the README may grow: a newcomer reads it to
// the end, and the rest belongs in docs/.
const maxREADMELines = 250

// goBlocks returns the ```go blocks of the Markdown file at path, each with
// the line it starts on.
func goBlocks(t *testing.T, path string) (blocks []string, lines []int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cur *strings.Builder
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &strings.Builder{}
			lines = append(lines, n+1)
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s: the go block at line %d is not closed", path, lines[len(lines)-1])
	}
	return blocks, lines
}

// knownImports are the packages the snippets may use, by name; a file
// imports those whose name it uses as a qualifier.
var knownImports = map[string]string{
	"context":        "context",
	"errors":         "errors",
	"fmt":            "fmt",
	"log":            "log",
	"os":             "os",
	"slices":         "slices",
	"testing":        "testing",
	"time":           "time",
	"flow":           "github.com/flowlite/flowlite/flow",
	"flowtest":       "github.com/flowlite/flowlite/flow/flowtest",
	"flowsqlite":     "github.com/flowlite/flowlite/flow/flowsqlite",
	"flowpg":         "github.com/flowlite/flowlite/flow/flowpg",
	"flowdef":        "github.com/flowlite/flowlite/flow/flowdef",
	"flowlitestream": "github.com/flowlite/flowlite/flow/flowlitestream",
	"flowui":         "github.com/flowlite/flowlite/flow/flowui",
	"flowprom":       "github.com/flowlite/flowlite/flow/flowprom",
	"http":           "net/http",
	"prometheus":     "github.com/prometheus/client_golang/prometheus",
	"promhttp":       "github.com/prometheus/client_golang/prometheus/promhttp",
}

// goFile returns a file of package main holding the blocks, importing the
// known packages they use.
func goFile(from string, blocks []string) string {
	body := strings.Join(blocks, "\n")
	var imports []string
	for name, path := range knownImports {
		if regexp.MustCompile(`\b` + name + `\.`).MatchString(body) {
			imports = append(imports, fmt.Sprintf("\t%q", path))
		}
	}
	slices.Sort(imports)
	var b strings.Builder
	fmt.Fprintf(&b, "// Code assembled from %s by internal/readme. DO NOT EDIT.\n\npackage main\n\n", from)
	if len(imports) > 0 {
		fmt.Fprintf(&b, "import (\n%s\n)\n\n", strings.Join(imports, "\n"))
	}
	b.WriteString(body)
	return b.String()
}

// docBlocks is the go code of one Markdown file, split into the blocks
// that hold tests and the others.
type docBlocks struct {
	path        string // relative to the repository root
	code, tests []string
	testNames   []string // the Test functions the blocks declare
}

var testFunc = regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)

// readBlocks returns the go blocks of the Markdown file at rel (relative
// to the repository root), failing the test for a block that is not a
// list of complete declarations: a fragment of statements (or an
// ellipsis) would not compile once pasted.
func readBlocks(t *testing.T, rel string) docBlocks {
	t.Helper()
	blocks, lines := goBlocks(t, filepath.Join(root, rel))
	d := docBlocks{path: rel}
	fset := token.NewFileSet()
	for i, b := range blocks {
		if _, err := parser.ParseFile(fset, rel, "package main\n"+b, parser.SkipObjectResolution); err != nil {
			t.Errorf("%s:%d: the go block is not a list of complete declarations: %v", rel, lines[i], err)
			continue
		}
		if strings.Contains(b, "*testing.T") {
			d.tests = append(d.tests, b)
			for _, m := range testFunc.FindAllStringSubmatch(b, -1) {
				d.testNames = append(d.testNames, m[1])
			}
		} else {
			d.code = append(d.code, b)
		}
	}
	return d
}

// docFiles returns docs/*.md, relative to the repository root.
func docFiles(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no docs/*.md")
	}
	var rels []string
	for _, p := range paths {
		rels = append(rels, filepath.Join("docs", filepath.Base(p)))
	}
	return rels
}

// TestCodeBlocksRun builds every go block of the README and of docs/*.md
// into two packages of a module in a temporary directory, vets them and
// runs their tests, then runs the README's program:
//
//   - tour: the README's blocks with examples/tour/services.go, the types
//     and fakes the tour points to and nothing else, so the tour compiles
//     as a whole. Its main places an order and prints the receipt, and
//     the README's flowtest test passes. Each README block is also a
//     verbatim part of examples/tour, so `go run ./examples/tour` is the
//     tour.
//   - docs: the blocks of every docs/*.md, one file per guide, with
//     examples/tour's code (the guides build on the tour's placeOrder) and
//     testdata's declarations and tests of the guides' expense workflow,
//     welcome job and PostgreSQL engine. Every Test function of a guide
//     must pass.
//
// A block that needs something the test does not have, like a PostgreSQL
// server or an S3 bucket, declares a function that nothing calls: it is
// compiled and vetted, never run; testdata/postgres_test.go runs
// docs/postgresql.md's openShared when a server is there (with
// FLOWLITE_PG_TEST=1 it must be).
func TestCodeBlocksRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a program")
	}
	readme := readBlocks(t, "README.md")
	if len(readme.code)+len(readme.tests) < 4 {
		t.Fatalf("README.md has %d go blocks; the tour has at least 4", len(readme.code)+len(readme.tests))
	}
	var guides []docBlocks
	for _, rel := range docFiles(t) {
		if d := readBlocks(t, rel); len(d.code)+len(d.tests) > 0 {
			guides = append(guides, d)
		}
	}
	if t.Failed() {
		return
	}

	// The README's blocks are examples/tour's code, as they are.
	var tourSource strings.Builder
	for _, name := range []string{"tour.go", "tour_test.go"} {
		b, err := os.ReadFile(filepath.Join(root, "examples", "tour", name))
		if err != nil {
			t.Fatal(err)
		}
		tourSource.Write(b)
	}
	for _, b := range slices.Concat(readme.code, readme.tests) {
		if !strings.Contains(tourSource.String(), b) {
			t.Errorf("this go block of README.md is not in examples/tour/tour.go or tour_test.go as it is:\n%s", b)
		}
	}

	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyFile := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		write(to, string(b))
	}
	tourDir := filepath.Join(root, "examples", "tour")
	write("tour/readme.go", goFile("README.md", readme.code))
	write("tour/readme_test.go", goFile("README.md", readme.tests))
	copyFile(filepath.Join(tourDir, "services.go"), "tour/services.go")

	var docTests []string
	for _, d := range guides {
		base := strings.TrimSuffix(filepath.Base(d.path), ".md")
		base = strings.ReplaceAll(base, "-", "_")
		if len(d.code) > 0 {
			write("docs/"+base+".go", goFile(d.path, d.code))
		}
		if len(d.tests) > 0 {
			write("docs/"+base+"_test.go", goFile(d.path, d.tests))
		}
		docTests = append(docTests, d.testNames...)
	}
	copyFile(filepath.Join(tourDir, "tour.go"), "docs/tour.go")
	copyFile(filepath.Join(tourDir, "services.go"), "docs/services.go")
	copyFile("testdata/support.go", "docs/support.go")
	copyFile("testdata/support_test.go", "docs/support_test.go")
	copyFile("testdata/postgres_test.go", "docs/postgres_test.go")

	// The project's requirements and sums, so that the build needs no
	// network, and the project itself from this checkout.
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	mod = regexp.MustCompile(`(?m)^module .*$`).ReplaceAll(mod, []byte("module readme"))
	mod = fmt.Appendf(mod, "\nrequire github.com/flowlite/flowlite v0.0.0\n\nreplace github.com/flowlite/flowlite => %s\n", abs)
	write("go.mod", string(mod))
	copyFile(filepath.Join(root, "go.sum"), "go.sum")

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		err := cmd.Run()
		t.Logf("go %s: %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	goCmd("vet", "./...")
	out := goCmd("test", "-count=1", "-v", "./...")
	for _, name := range slices.Concat(readme.testNames, docTests) {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("the docs' test %s did not pass:\n%s", name, out)
		}
	}
	// With FLOWLITE_PG_TEST=1 (CI), docs/postgresql.md's engine must have
	// run the order on PostgreSQL, not skipped.
	if os.Getenv("FLOWLITE_PG_TEST") == "1" && !strings.Contains(out, "--- PASS: TestTheProgramOnPostgreSQL") {
		t.Errorf("docs/postgresql.md's engine did not run on PostgreSQL:\n%s", out)
	}
	// main runs on the real clock: it must finish, not wait forever for an
	// engine that works its queue.
	runCtx, cancelRun := context.WithTimeout(ctx, time.Minute)
	defer cancelRun()
	goCmd("build", "-o", "tour.bin", "./tour")
	cmd := exec.CommandContext(runCtx, filepath.Join(dir, "tour.bin"))
	cmd.Dir = dir
	mainOut, err := cmd.CombinedOutput()
	if err != nil || runCtx.Err() != nil {
		t.Fatalf("the README's main: %v (context: %v)\n%s", err, runCtx.Err(), mainOut)
	}
	if got := strings.TrimSpace(string(mainOut)); got != "charged ch_1042" {
		t.Errorf("the README's main printed %q, want %q", got, "charged ch_1042")
	}
}

// TestREADMEIsShort keeps the README to what a newcomer reads to the end.
func TestREADMEIsShort(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > maxREADMELines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to docs/", n, maxREADMELines)
	}
}

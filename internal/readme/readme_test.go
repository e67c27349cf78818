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

// knownImports are the packages README snippets may use, by name; a file
// imports those whose name it uses as a qualifier.
var knownImports = map[string]string{
	"context":    "context",
	"errors":     "errors",
	"fmt":        "fmt",
	"log":        "log",
	"os":         "os",
	"slices":     "slices",
	"testing":    "testing",
	"time":       "time",
	"flow":       "github.com/flowlite/flowlite/flow",
	"flowtest":   "github.com/flowlite/flowlite/flow/flowtest",
	"flowsqlite": "github.com/flowlite/flowlite/flow/flowsqlite",
	"flowpg":     "github.com/flowlite/flowlite/flow/flowpg",
	"flowdef":    "github.com/flowlite/flowlite/flow/flowdef",
	"flowui":     "github.com/flowlite/flowlite/flow/flowui",
	"flowprom":   "github.com/flowlite/flowlite/flow/flowprom",
	"http":       "net/http",
	"prometheus": "github.com/prometheus/client_golang/prometheus",
	"promhttp":   "github.com/prometheus/client_golang/prometheus/promhttp",
}

// goFile returns a file of package main holding the blocks, importing the
// known packages they use.
func goFile(blocks []string) string {
	body := strings.Join(blocks, "\n")
	var imports []string
	for name, path := range knownImports {
		if regexp.MustCompile(`\b` + name + `\.`).MatchString(body) {
			imports = append(imports, fmt.Sprintf("\t%q", path))
		}
	}
	slices.Sort(imports)
	var b strings.Builder
	b.WriteString("// Code assembled from README.md by internal/readme. DO NOT EDIT.\n\npackage main\n\n")
	if len(imports) > 0 {
		fmt.Fprintf(&b, "import (\n%s\n)\n\n", strings.Join(imports, "\n"))
	}
	b.WriteString(body)
	return b.String()
}

// Every Go block of the README is a complete declaration, and together,
// with testdata/support.go, they make a program that runs: its main places
// an order and prints the receipt, and the README's flowtest test passes,
// with the harness's tests of the expense workflow, the approve handler
// and the welcome job.
//
// A block that needs something the test does not have, like the "Scale
// out" block's PostgreSQL server, declares a function that nothing calls:
// it is compiled and vetted, never run.
func TestREADMECodeRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a program")
	}
	readme := filepath.Join(root, "README.md")
	blocks, lines := goBlocks(t, readme)
	if len(blocks) < 5 {
		t.Fatalf("README.md has %d go blocks; the tour has at least 5", len(blocks))
	}
	var code, tests []string
	fset := token.NewFileSet()
	for i, b := range blocks {
		// Each block must stand alone as declarations: a fragment of
		// statements (or an ellipsis) would not compile once pasted.
		if _, err := parser.ParseFile(fset, "README.md", "package main\n"+b, parser.SkipObjectResolution); err != nil {
			t.Errorf("README.md:%d: the go block is not a list of complete declarations: %v", lines[i], err)
			continue
		}
		if strings.Contains(b, "*testing.T") {
			tests = append(tests, b)
		} else {
			code = append(code, b)
		}
	}
	if t.Failed() {
		return
	}

	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
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
	write("readme.go", goFile(code))
	write("readme_test.go", goFile(tests))
	copyFile("testdata/support.go", "support.go")
	copyFile("testdata/support_test.go", "support_test.go")
	copyFile("testdata/postgres_test.go", "postgres_test.go")
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

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
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
			readmeGo, _ := os.ReadFile(filepath.Join(dir, "readme.go"))
			t.Fatalf("go %s: %v\n%s\nreadme.go:\n%s", strings.Join(args, " "), err, out.String(), readmeGo)
		}
		return out.String()
	}
	goCmd("vet", ".")
	out := goCmd("test", "-count=1", "-v", ".")
	if !strings.Contains(out, "--- PASS: TestOrderIsRolledBackWhenTheCardIsDeclined") {
		t.Errorf("the README's test did not pass:\n%s", out)
	}
	// With FLOWLITE_PG_TEST=1 (CI), the Scale out block must have run the
	// order on PostgreSQL, not skipped.
	if os.Getenv("FLOWLITE_PG_TEST") == "1" && !strings.Contains(out, "--- PASS: TestTheProgramOnPostgreSQL") {
		t.Errorf("the README's program did not run on PostgreSQL:\n%s", out)
	}
	// main runs on the real clock: it must finish, not wait forever for an
	// engine that works its queue.
	runCtx, cancelRun := context.WithTimeout(ctx, time.Minute)
	defer cancelRun()
	goCmd("build", "-o", "readme.bin", ".")
	cmd := exec.CommandContext(runCtx, filepath.Join(dir, "readme.bin"))
	cmd.Dir = dir
	mainOut, err := cmd.CombinedOutput()
	if err != nil || runCtx.Err() != nil {
		t.Fatalf("the README's main: %v (context: %v)\n%s", err, runCtx.Err(), mainOut)
	}
	if got := strings.TrimSpace(string(mainOut)); got != "charged ch_1042" {
		t.Errorf("the README's main printed %q, want %q", got, "charged ch_1042")
	}
}

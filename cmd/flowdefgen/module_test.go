package main

import (
	"bytes"
	"context"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGenerateInANewModule follows the setup this package's doc and
// docs/workflows-as-data.md give, in a new module holding the files of
// examples/billing (the example they show): the tool directive, go mod
// tidy, go generate with `go tool flowdefgen`, then the program runs and
// prints what the example prints. flowlite itself comes from this
// checkout (a replace directive), its dependencies from the module cache
// or GOPROXY (issue 22, items 2 and 3).
func TestGenerateInANewModule(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	example := filepath.Join(root, "examples", "billing")
	dir := t.TempDir()
	for _, name := range []string{"billing.yaml", "gen.go", "steps.go", "main.go"} {
		b, err := os.ReadFile(filepath.Join(example, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		err := cmd.Run()
		t.Logf("%s %s: %s", name, strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	run("go", "mod", "init", "example.com/billing")
	run("go", "mod", "edit", "-replace", "github.com/flowlite/flowlite="+root)
	// The documented commands, as written.
	run("sh", "-c", "go mod edit -tool=github.com/flowlite/flowlite/cmd/flowdefgen && go mod tidy")
	run("go", "generate", "./...")

	for _, name := range []string{"billing_flowdef.go", "billing_flowdef_test.go"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("go generate did not write %s: %v", name, err)
		}
		want, err := os.ReadFile(filepath.Join(example, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from examples/billing's (go generate ./examples/billing)", name)
		}
	}
	out := run("go", "run", ".")
	const want = `ada: batch-ada, 375 cents, notified: true
bob: batch-bob, 125 cents, notified: false
cy: rolled back
voided: [batch-cy]; log: [notified ada of 375 cents]
stored: billing version 1
`
	if out != want {
		t.Errorf("go run . printed\n%s\nwant\n%s", out, want)
	}
}

// TestPackageDocNamesTheConventions: go doc ./cmd/flowdefgen documents
// the setup and how a definition's names become Go names, not an
// internal package (issue 22, item 3).
func TestPackageDocNamesTheConventions(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	for _, want := range []string{
		"go mod edit -tool=github.com/flowlite/flowlite/cmd/flowdefgen && go mod tidy",
		"//go:generate go tool flowdefgen billing.yaml",
		"OpenBatchInput and OpenBatchOutput",
		"OpenBatch(ctx context.Context, in OpenBatchInput) (OpenBatchOutput, error)",
		"VoidBatch(ctx context.Context, in OpenBatchInput, out OpenBatchOutput) error",
		"examples/billing",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the package doc lacks %q", want)
		}
	}
	if strings.Contains(doc, "internal/defgen") {
		t.Error("the package doc sends readers to internal/defgen")
	}
}

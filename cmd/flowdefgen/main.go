// Command flowdefgen generates typed Go code for a workflow definition
// (flow/flowdef), from a go:generate line:
//
//	//go:generate go run github.com/flowlite/flowlite/cmd/flowdefgen pipeline.yaml
//
// It writes NAME_flowdef.go (input and output structs, the interface of
// the steps to implement, typed step values, New<Name>, a typed Start and
// run handle, and references to every step type field the definition
// names, so that removing one is a compile error) and NAME_flowdef_test.go
// (a test that checks the definition against the steps' Go types) next to
// the definition, in the package $GOPACKAGE (or -package). It reads the
// step types' fields from the Go package in the definition's directory,
// and fails, at the definition's file:line:column, on a field the
// definition names that the type lacks. See internal/defgen for the
// conventions.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/flowlite/flowlite/flow/flowdef"
	"github.com/flowlite/flowlite/internal/defgen"
)

func main() {
	if err := run(os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintf(os.Stderr, "flowdefgen: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string) error {
	fs := flag.NewFlagSet("flowdefgen", flag.ContinueOnError)
	pkg := fs.String("package", getenv("GOPACKAGE"), "package of the generated files (default $GOPACKAGE)")
	out := fs.String("o", "", "the generated file (default: the definition's name with _flowdef.go)")
	noTest := fs.Bool("notest", false, "do not write the _test.go file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("expected one definition file, got %d arguments", fs.NArg())
	}
	file := fs.Arg(0)
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	d, err := flowdef.Validate(file, src, nil)
	if err != nil {
		return err
	}
	files, err := defgen.Generate(d, defgen.Options{Package: *pkg, File: file})
	if err != nil {
		return err
	}
	if *out == "" {
		*out = strings.TrimSuffix(file, filepath.Ext(file)) + "_flowdef.go"
	}
	if err := os.WriteFile(*out, files.Code, 0o644); err != nil {
		return err
	}
	if *noTest {
		return nil
	}
	return os.WriteFile(strings.TrimSuffix(*out, ".go")+"_test.go", files.Test, 0o644)
}

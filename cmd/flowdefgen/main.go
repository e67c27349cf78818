// Command flowdefgen generates typed Go code for a workflow definition
// (see package flow/flowdef), so that a program whose steps disagree with
// the definition does not compile.
//
// # Setting it up
//
// Add flowdefgen to the module as a tool, which records its version in
// go.mod and go.sum (so go generate needs no network and every machine
// runs the same generator):
//
//	go mod edit -tool=github.com/flowlite/flowlite/cmd/flowdefgen && go mod tidy
//
// and put a go:generate line in a Go file next to the definition:
//
//	//go:generate go tool flowdefgen billing.yaml
//
// go generate ./... then writes billing_flowdef.go (the code) and
// billing_flowdef_test.go (a test that checks the definition against the
// steps' Go types) beside the definition, in the package $GOPACKAGE.
//
// # Conventions
//
// Names in the definition become exported Go identifiers: split on
// anything but letters and digits and at camelCase, each word capitalised,
// common initialisms upper-cased (open_batch → OpenBatch, order_id →
// OrderID). For a definition named billing:
//
//   - uses: open_batch expects the package to declare the step's types
//     OpenBatchInput and OpenBatchOutput, and the generated interface
//     BillingSteps has the method
//     OpenBatch(ctx context.Context, in OpenBatchInput) (OpenBatchOutput, error).
//     BillingOpenBatchStep(steps) is that step as a flow.Step, to test it
//     alone with flowtest.RunStep.
//   - compensate: void_batch adds the method
//     VoidBatch(ctx context.Context, in OpenBatchInput, out OpenBatchOutput) error,
//     with the types of the step it undoes. A step's own compensation is a
//     method CompensateOpenBatch(ctx, in, out) error, used when the
//     implementation has it.
//   - inputs and outputs become the fields of BillingInput and
//     BillingOutput (notify → Notify), typed by their declared types: int
//     is int, number float64, string string, bool bool, list []any, object
//     map[string]any, any (or no type) any.
//   - NewBilling(steps, cat) compiles the definition against the steps
//     (cat: nil, or a catalog holding the child workflows it calls), and
//     the *Billing it returns has Register(ctx, e), which stores the
//     definition in the engine's database (for flowlite def list, def show
//     and the dashboard) and registers it, and Start(ctx, e, in, opts),
//     which returns a *BillingRun whose Result is a BillingOutput;
//     flowtest.Await takes that handle too. ValidateBilling checks the
//     definition against the step types without running anything.
//
// BillingInput passes every field as it is, zero values included, so
// Notify: false wins over a default of true; NewBillingInput returns an
// input with the definition's defaults set.
//
// Generation reads the step types' fields from the Go package in the
// definition's directory and fails, at the definition's file:line:column,
// on a field the definition names (a key of with, steps.ID.output.FIELD)
// that the Go type lacks, naming the type. The generated code refers to
// each such field by its Go name, so a step type that later loses one no
// longer compiles.
//
// A complete example is examples/billing, shown in
// docs/workflows-as-data.md.
//
// Usage:
//
//	flowdefgen [-package name] [-o file] [-notest] definition.yaml
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

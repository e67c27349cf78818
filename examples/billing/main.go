// Command billing runs billing.yaml, a workflow defined as data, through
// the typed Go that flowdefgen generates from it (go generate): it bills
// three customers on a SQLite file, one of whom asked not to be notified
// and one of whom has a line nobody can price, so that run is rolled back
// and its batch voided.
//
//	go run ./examples/billing
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "billing:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	dir, err := os.MkdirTemp("", "billing-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	eng, err := flowsqlite.Open(ctx, filepath.Join(dir, "billing.db"), &flow.Config{PollInterval: 20 * time.Millisecond}, nil)
	if err != nil {
		return err
	}
	defer eng.Close()
	s := &steps{}
	billing, err := NewBilling(s, nil)
	if err != nil {
		return err
	}
	// Register stores billing.yaml in the database too, so that
	// flowlite def list and the dashboard see it.
	if err := billing.Register(ctx, eng); err != nil {
		return err
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer eng.Stop(context.Background())

	// NewBillingInput has the definition's defaults (notify: true); a
	// field set on it wins, even when it is false.
	ada := NewBillingInput()
	ada.Customer, ada.Lines = "ada", []any{"widget", "gadget"}
	bob := NewBillingInput()
	bob.Customer, bob.Lines, bob.Notify = "bob", []any{"gadget"}, false
	cy := NewBillingInput()
	cy.Customer, cy.Lines = "cy", []any{"widget", "unicorn"}

	for _, in := range []BillingInput{ada, bob, cy} {
		r, err := billing.Start(ctx, eng, in, &flow.StartOptions{RunID: "billing-" + in.Customer})
		if err != nil {
			return err
		}
		res, err := r.Result(ctx) // a BillingOutput
		switch {
		case errors.Is(err, flow.ErrRolledBack):
			fmt.Fprintf(out, "%s: rolled back\n", in.Customer)
		case err != nil:
			return err
		default:
			fmt.Fprintf(out, "%s: %s, %d cents, notified: %v\n", in.Customer, res.Batch, res.Cents, res.Notified)
		}
	}
	fmt.Fprintf(out, "voided: %v; log: %v\n", s.voided, s.log)
	defs, err := eng.ListDefinitions(ctx)
	if err != nil {
		return err
	}
	for _, d := range defs {
		fmt.Fprintf(out, "stored: %s version %d\n", d.Name, d.Version)
	}
	return nil
}

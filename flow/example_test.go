package flow_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// A saga: the payment is declined for good, so the reservation made before
// it is released, and Result reports the run as rolled back.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "flowlite-example")
	defer os.RemoveAll(dir)

	eng, err := flowsqlite.Open(ctx, filepath.Join(dir, "app.db"), nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close()

	reserve := flow.Step[string, string]{
		Name: "reserve",
		Run:  func(_ context.Context, item string) (string, error) { return "hold-" + item, nil },
		Compensate: func(_ context.Context, item, hold string) error {
			fmt.Println("released", hold)
			return nil
		},
	}
	charge := flow.Step[string, string]{
		Name: "charge",
		Run: func(context.Context, string) (string, error) {
			return "", flow.Permanent(errors.New("card declined"))
		},
	}
	order := flow.Workflow[string, string]{
		Name: "order",
		Run: func(wc flow.Context, item string) (string, error) {
			hold, err := flow.Do(wc, reserve, item)
			if err != nil {
				return "", err
			}
			return flow.Do(wc, charge, hold)
		},
	}
	flow.Register(eng, order)
	if err := eng.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Stop(ctx)

	run, err := flow.Start(ctx, eng, order, "lamp", &flow.StartOptions{RunID: "order-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = run.Result(ctx)
	fmt.Println(errors.Is(err, flow.ErrRolledBack))
	fmt.Println(err)
	// Output:
	// released hold-lamp
	// true
	// run order-1 rolled back: step charge failed after 1 attempt(s): card declined
}

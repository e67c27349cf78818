package flow_test

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/flow"
)

// Values put in the starter's context reach every step of the run, on
// every attempt and replay, from the run's record.
func ExampleWithValue() {
	ctx := context.Background()
	eng, done, err := openExample(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()

	invoice := flow.Step[string, string]{
		Name: "invoice",
		Run: func(ctx context.Context, id string) (string, error) {
			tenant, _ := flow.Value(ctx, "tenant")
			return "invoice " + id + " for " + tenant, nil
		},
	}
	bill := flow.Workflow[string, string]{
		Name: "bill",
		Run:  func(wc flow.Context, id string) (string, error) { return flow.Do(wc, invoice, id) },
	}
	flow.Register(eng, bill)
	if err := eng.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Stop(ctx)

	run, err := flow.Start(flow.WithValue(ctx, "tenant", "acme"), eng, bill, "inv-1", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := run.Result(ctx)
	fmt.Println(out, err)
	// Output:
	// invoice inv-1 for acme <nil>
}

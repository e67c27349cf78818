package flow_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/flow"
)

// A unique key deduplicates starts that do not share a run ID: the second
// checkout of one cart meets the first run's key. By default it gets a
// handle on that run; with RefuseDuplicate it fails, naming the holder, and
// records nothing.
func ExampleStart_uniqueKey() {
	ctx := context.Background()
	eng, done, err := openExample(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()

	checkout := flow.Workflow[string, string]{
		Name: "checkout",
		Run:  func(_ flow.Context, cart string) (string, error) { return "paid " + cart, nil },
	}
	flow.Register(eng, checkout)

	first, err := flow.Start(ctx, eng, checkout, "cart-9", &flow.StartOptions{RunID: "checkout-1", UniqueKey: "cart-9"})
	if err != nil {
		fmt.Println(err)
		return
	}
	again, err := flow.Start(ctx, eng, checkout, "cart-9", &flow.StartOptions{UniqueKey: "cart-9"})
	fmt.Println(again.ID(), again.Existing(), err)

	_, err = flow.Start(ctx, eng, checkout, "cart-9", &flow.StartOptions{
		UniqueKey: "cart-9", OnDuplicate: flow.RefuseDuplicate,
	})
	var dup *flow.DuplicateError
	fmt.Println(errors.Is(err, flow.ErrDuplicate), errors.As(err, &dup) && dup.HolderID == first.ID())

	if err := eng.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Stop(ctx)
	out, err := first.Result(ctx)
	fmt.Println(out, err)
	// Output:
	// checkout-1 true <nil>
	// true true
	// paid cart-9 <nil>
}

package flow_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/flowlite/flowlite/flow"
)

// The change feed: every event of every run, in position order. A named
// consumer stores its position, so a second read resumes after what the
// first one handled.
func ExampleEngine_Changes() {
	ctx := context.Background()
	eng, done, err := openExample(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()

	greet := flow.Step[string, string]{
		Name: "greet",
		Run:  func(_ context.Context, name string) (string, error) { return "hello " + name, nil },
	}
	hello := flow.Workflow[string, string]{
		Name: "hello",
		Run:  func(wc flow.Context, name string) (string, error) { return flow.Do(wc, greet, name) },
	}
	flow.Register(eng, hello)
	if err := eng.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Stop(ctx)
	run, err := flow.Start(ctx, eng, hello, "ada", &flow.StartOptions{RunID: "hello-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := run.Result(ctx); err != nil {
		fmt.Println(err)
		return
	}

	read := func() {
		for c, err := range eng.Changes(ctx, &flow.ChangesOptions{Consumer: "audit"}) {
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Println(strings.TrimSpace(c.RunID + " " + c.Kind + " " + c.Step))
		}
	}
	read()
	fmt.Println("again:")
	read() // nothing new since the consumer's position
	// Output:
	// hello-1 run_started
	// hello-1 run_claimed
	// hello-1 step_started greet
	// hello-1 step_completed greet
	// hello-1 run_completed
	// again:
}

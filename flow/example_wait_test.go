package flow_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// openExample opens an engine on a fresh file in a temporary directory and
// returns it with a function that closes it and removes the directory.
func openExample(ctx context.Context) (*flow.Engine, func(), error) {
	dir, err := os.MkdirTemp("", "flowlite-example")
	if err != nil {
		return nil, nil, err
	}
	eng, err := flowsqlite.Open(ctx, filepath.Join(dir, "app.db"), nil, nil)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return eng, func() { eng.Close(); os.RemoveAll(dir) }, nil
}

// A run waits for a signal, holding no goroutine while it waits. The
// approval is sent twice under one key, as a retried HTTP request would
// send it: the repeat is dropped and the first send stands.
func ExampleSignal() {
	ctx := context.Background()
	eng, done, err := openExample(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()

	type decision struct{ Approved bool }
	expense := flow.Workflow[string, string]{
		Name: "expense",
		Run: func(wc flow.Context, id string) (string, error) {
			d, err := flow.Receive[decision](wc, "decision", 48*time.Hour)
			if err != nil {
				return "", err
			}
			if !d.Approved {
				return id + " refused", nil
			}
			return id + " approved", nil
		},
	}
	flow.Register(eng, expense)
	run, err := flow.Start(ctx, eng, expense, "e-7", &flow.StartOptions{RunID: "expense-7"})
	if err != nil {
		fmt.Println(err)
		return
	}
	// A signal sent before the run receives it is kept for it.
	for range 2 {
		sent, err := flow.Signal(ctx, eng, run.ID(), "decision", decision{Approved: true}, &flow.SignalOptions{Key: "request-1"})
		fmt.Println("sent:", sent, err)
	}
	if err := eng.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Stop(ctx)
	out, err := run.Result(ctx)
	fmt.Println(out, err)
	// Output:
	// sent: true <nil>
	// sent: false <nil>
	// e-7 approved <nil>
}

// Branches run concurrently and join; each branch's steps are recorded on
// their own, so a replay takes the same results in the same order.
func ExampleAll() {
	ctx := context.Background()
	eng, done, err := openExample(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()

	quote := flow.Step[string, string]{
		Name: "quote",
		Run: func(_ context.Context, carrier string) (string, error) {
			return carrier + ": " + fmt.Sprint(len(carrier)*100) + " cents", nil
		},
	}
	quotes := flow.Workflow[[]string, string]{
		Name: "quotes",
		Run: func(wc flow.Context, carriers []string) (string, error) {
			var branches []func(flow.Context) (string, error)
			for _, c := range carriers {
				branches = append(branches, func(wc flow.Context) (string, error) { return flow.Do(wc, quote, c) })
			}
			all, err := flow.All(wc, branches...)
			return strings.Join(all, "; "), err
		},
	}
	flow.Register(eng, quotes)
	if err := eng.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Stop(ctx)

	run, err := flow.Start(ctx, eng, quotes, []string{"ups", "dhl", "fedex"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := run.Result(ctx)
	fmt.Println(out, err)
	// Output:
	// ups: 300 cents; dhl: 300 cents; fedex: 500 cents <nil>
}

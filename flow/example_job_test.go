package flow_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// A job queue: a one-step job, a unique enqueue, and a dead letter
// requeued once its cause is fixed.
func ExampleEnqueue() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "flowlite-example")
	defer os.RemoveAll(dir)
	eng, err := flowsqlite.Open(ctx, filepath.Join(dir, "app.db"), nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close()

	var smtpDown atomic.Bool
	smtpDown.Store(true)
	welcome := flow.Job[string]{
		Name:        "welcome-email",
		MaxAttempts: 1,
		Handler: func(_ context.Context, to string) error {
			if smtpDown.Load() {
				return errors.New("smtp: connection refused")
			}
			fmt.Println("sent welcome to", to)
			return nil
		},
	}
	flow.RegisterJob(eng, welcome)

	// At most one unfinished welcome per user, however often signup retries.
	opts := &flow.EnqueueOptions{UniqueKey: "user-42"}
	run, _ := flow.Enqueue(ctx, eng, welcome, "ada@example.com", opts)
	dup, _ := flow.Enqueue(ctx, eng, welcome, "ada@example.com", opts)
	fmt.Println("duplicate is the same run:", dup.ID() == run.ID(), dup.Existing())

	if err := eng.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_, err = run.Result(ctx)
	fmt.Println(err != nil, errors.Is(err, flow.ErrRolledBack))
	dead, _ := eng.DeadLetters(ctx, flow.DeadLetterFilter{Workflow: "welcome-email"})
	fmt.Println(len(dead), "dead letter:", dead[0].Error)

	smtpDown.Store(false)
	newID, _ := eng.Requeue(ctx, run.ID())
	again, _ := flow.Lookup(ctx, eng, welcome.Workflow(), newID)
	_, err = again.Result(ctx)
	fmt.Println("requeued run:", err)
	// Output:
	// duplicate is the same run: true true
	// true true
	// 1 dead letter: step welcome-email failed after 1 attempt(s): smtp: connection refused
	// sent welcome to ada@example.com
	// requeued run: <nil>
}

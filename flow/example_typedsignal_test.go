package flow_test

import (
	"context"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// Approval is the payload of the "approval" signal.
type Approval struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

// approvalSignal names the signal and its payload type once: the workflow
// receives through it and senders send through it, so a sender of another
// type does not compile.
var approvalSignal = flow.NewSignal[Approval]("approval")

// A typed signal, received by the workflow and sent by another part of the
// program. Fields a payload has and the receiver's type lacks are ignored,
// so a sender may add one (here "by") before every receiver knows it.
func ExampleNewSignal() {
	ctx := context.Background()
	eng, done, err := openExample(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer done()

	expense := flow.Workflow[string, string]{
		Name: "typed_expense",
		Run: func(wc flow.Context, id string) (string, error) {
			a, err := approvalSignal.Receive(wc, 48*time.Hour)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%s approved=%v by %s", id, a.Approved, a.By), nil
		},
	}
	flow.Register(eng, expense)
	if err := eng.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Stop(ctx)
	run, err := flow.Start(ctx, eng, expense, "e-8", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	sent, err := approvalSignal.Send(ctx, eng, run.ID(), Approval{Approved: true, By: "dana"}, nil)
	fmt.Println("sent:", sent, err)
	fmt.Println(run.Result(ctx))
	// Output:
	// sent: true <nil>
	// e-8 approved=true by dana <nil>
}

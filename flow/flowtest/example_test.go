package flowtest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// A test of a saga: the card is declined for good, so the booked hotel and
// flight are cancelled, in reverse order.
func Example() {
	t := &exampleT{} // in a real test, the test's *testing.T
	defer t.finish()

	book := func(name string) flow.Step[string, string] {
		return flow.Step[string, string]{
			Name: "book_" + name,
			Run:  func(_ context.Context, trip string) (string, error) { return name + " for " + trip, nil },
			Compensate: func(_ context.Context, trip, booking string) error {
				fmt.Println("cancelled", booking)
				return nil
			},
		}
	}
	flight, hotel := book("flight"), book("hotel")
	pay := flow.Step[string, string]{
		Name: "pay",
		Run:  func(_ context.Context, trip string) (string, error) { return "paid", nil },
	}
	trip := flow.Workflow[string, string]{
		Name: "book_trip",
		Run: func(wc flow.Context, trip string) (string, error) {
			for _, s := range []flow.Step[string, string]{flight, hotel, pay} {
				if _, err := flow.Do(wc, s, trip); err != nil {
					return "", err
				}
			}
			return "booked", nil
		},
	}

	env := flowtest.New(t, nil)
	env.FailStep("pay", 2, errors.New("card network timeout"))
	out, run, err := flowtest.RunWorkflow(env, trip, "Lisbon")
	fmt.Println(out, err, len(env.Attempts(run.ID())), "attempts")

	env.FailStep("pay", -1, flow.Permanent(errors.New("card declined")))
	_, run, err = flowtest.RunWorkflow(env, trip, "Oslo")
	fmt.Println(errors.Is(err, flow.ErrRolledBack), env.Compensated(run.ID()))
	// Output:
	// booked <nil> 5 attempts
	// cancelled hotel for Oslo
	// cancelled flight for Oslo
	// true [book_hotel book_flight]
}

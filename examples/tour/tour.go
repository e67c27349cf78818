// Command tour is the README's tour as one program: the reserve_inventory
// step, the place_order workflow and a main that runs one order on an
// embedded SQLite file, app.db in the working directory, and prints its
// charge. The README shows this file's declarations as they are;
// services.go holds the types and the fake services they use, and
// tour_test.go the README's test.
//
//	go run ./examples/tour
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

var reserve = flow.Step[Order, Reservation]{
	Name: "reserve_inventory", // persisted: never derive it from a Go type name
	Run: func(ctx context.Context, o Order) (Reservation, error) {
		return inventory.Reserve(ctx, o.ID, o.Items) // idempotent on o.ID
	},
	Compensate: func(ctx context.Context, o Order, r Reservation) error {
		return inventory.Release(ctx, r.ID)
	},
	Retry:   &flow.RetryPolicy{MaxAttempts: 5, InitialInterval: time.Second, Jitter: 0.2},
	Timeout: 10 * time.Second, // per attempt, through ctx
}

var placeOrder = flow.Workflow[Order, Receipt]{
	Name:    "place_order",
	Version: 1,
	Run: func(wc flow.Context, o Order) (Receipt, error) {
		r, err := flow.Do(wc, reserve, o)
		if err != nil {
			return Receipt{}, err
		}
		c, err := flow.Do(wc, charge, Payment{Order: o.ID, Cents: o.Total})
		if err != nil {
			return Receipt{}, err // reserve_inventory is compensated
		}
		return Receipt{Reservation: r.ID, Charge: c.ID}, nil
	},
}

func main() {
	ctx := context.Background()
	eng, err := flowsqlite.Open(ctx, "app.db", &flow.Config{ // WAL, synchronous=FULL, migrated
		Queues: map[string]flow.QueueConfig{"orders": {}}, // {}: concurrency 10
	}, nil) // nil: flowsqlite.Options' defaults
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	flow.Register(eng, placeOrder)
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer eng.Stop(ctx) // graceful drain, bounded by ctx

	order := Order{ID: "1042", Items: []string{"pen"}, Total: 1250}
	run, err := flow.Start(ctx, eng, placeOrder, order, &flow.StartOptions{
		RunID: "order-" + order.ID, // idempotency key: starting it again returns this run
		Queue: "orders", Priority: 5,
	})
	if err != nil {
		log.Fatal(err)
	}
	receipt, err := run.Result(ctx)
	switch {
	case errors.Is(err, flow.ErrRolledBack): // failed; every completed step was compensated
	case errors.Is(err, flow.ErrSuspended): // a compensation kept failing; an operator decides
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println("charged", receipt.Charge)
	}
}

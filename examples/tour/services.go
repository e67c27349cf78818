package main

// The types and the fake services the tour uses. The fakes keep what they
// were asked in memory, so that a test can check it.

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/flowlite/flowlite/flow"
)

// Order is the input of place_order.
type Order struct {
	ID    string
	Items []string
	Total int64 // cents
}

// Reservation is what the inventory holds for an order.
type Reservation struct{ ID string }

// Payment is the input of charge_payment.
type Payment struct {
	Order string
	Cents int64
}

// Charge is a payment taken.
type Charge struct{ ID string }

// Receipt is the output of place_order.
type Receipt struct{ Reservation, Charge string }

// order is the order the tour's test places.
var order = Order{ID: "7", Items: []string{"lamp"}, Total: 4900}

// charge takes the payment; a non-positive amount fails for good.
var charge = flow.Step[Payment, Charge]{
	Name: "charge_payment",
	Run: func(_ context.Context, p Payment) (Charge, error) {
		if p.Cents <= 0 {
			return Charge{}, flow.Permanent(fmt.Errorf("charge order %s: %d cents", p.Order, p.Cents))
		}
		return Charge{ID: "ch_" + p.Order}, nil
	},
}

// ledger records IDs from step bodies, which run on engine goroutines.
type ledger struct {
	mu  sync.Mutex
	ids []string
}

func (l *ledger) add(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids = append(l.ids, id)
}

func (l *ledger) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...)
}

// fakeInventory reserves anything and remembers what it released.
type fakeInventory struct{ released ledger }

func (inv *fakeInventory) Reserve(_ context.Context, orderID string, items []string) (Reservation, error) {
	if len(items) == 0 {
		return Reservation{}, flow.Permanent(errors.New("nothing to reserve"))
	}
	return Reservation{ID: "res_" + orderID}, nil
}

func (inv *fakeInventory) Release(_ context.Context, id string) error {
	inv.released.add(id)
	return nil
}

var inventory = &fakeInventory{}

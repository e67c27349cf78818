// The declarations the README's tour uses but does not show: the domain
// types, the charge step, and fakes of the inventory and mailer services.
// internal/readme's test copies this file next to the README's code.

package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/flowlite/flowlite/flow"
)

type Order struct {
	ID    string
	Items []string
	Total int64 // cents
}

type Reservation struct{ ID string }

type Payment struct {
	Order string
	Cents int64
}

type Charge struct{ ID string }

type Receipt struct{ Reservation, Charge string }

type Expense struct {
	ID    string
	Cents int64
}

type Payout struct{ ID string }

type Decision struct{ Approved bool }

type Email struct{ To, Subject string }

// order is the order the README's test places.
var order = Order{ID: "7", Items: []string{"lamp"}, Total: 4900}

var charge = flow.Step[Payment, Charge]{
	Name: "charge_payment",
	Run: func(_ context.Context, p Payment) (Charge, error) {
		if p.Cents <= 0 {
			return Charge{}, flow.Permanent(fmt.Errorf("charge order %s: %d cents", p.Order, p.Cents))
		}
		return Charge{ID: "ch_" + p.Order}, nil
	},
}

var reserveBudget = flow.Step[Expense, string]{
	Name: "reserve_budget",
	Run:  func(_ context.Context, e Expense) (string, error) { return "budget_" + e.ID, nil },
	Compensate: func(_ context.Context, e Expense, _ string) error {
		budget.release(e.ID)
		return nil
	},
}

var pay = flow.Step[Expense, Payout]{
	Name: "pay_expense",
	Run:  func(_ context.Context, e Expense) (Payout, error) { return Payout{ID: "po_" + e.ID}, nil },
}

// ledger records IDs from step bodies, which run on engine goroutines.
type ledger struct {
	mu  sync.Mutex
	ids []string
}

func (l *ledger) release(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids = append(l.ids, id)
}

func (l *ledger) released() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...)
}

var budget ledger

type fakeInventory struct{ released ledger }

func (inv *fakeInventory) Reserve(_ context.Context, orderID string, items []string) (Reservation, error) {
	if len(items) == 0 {
		return Reservation{}, flow.Permanent(errors.New("nothing to reserve"))
	}
	return Reservation{ID: "res_" + orderID}, nil
}

func (inv *fakeInventory) Release(_ context.Context, id string) error {
	inv.released.release(id)
	return nil
}

var inventory = &fakeInventory{}

type fakeMailer struct{ sent ledger }

func (m *fakeMailer) Send(_ context.Context, e Email) error {
	m.sent.release(e.To + ": " + e.Subject)
	return nil
}

var mailer = &fakeMailer{}

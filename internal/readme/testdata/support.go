// The declarations the code of docs/*.md uses but does not show, beside
// examples/tour's: the expense workflow's types and steps, the mailer the
// welcome job sends through, and the receipt workflow a detached child runs.
// internal/readme's test copies this file next to the docs' code.

package main

import (
	"context"

	"github.com/flowlite/flowlite/flow"
)

type Expense struct {
	ID    string
	Cents int64
}

type Payout struct{ ID string }

type Decision struct{ Approved bool }

type Email struct{ To, Subject string }

var reserveBudget = flow.Step[Expense, string]{
	Name: "reserve_budget",
	Run:  func(_ context.Context, e Expense) (string, error) { return "budget_" + e.ID, nil },
	Compensate: func(_ context.Context, e Expense, _ string) error {
		budget.add(e.ID)
		return nil
	},
}

var pay = flow.Step[Expense, Payout]{
	Name: "pay_expense",
	Run:  func(_ context.Context, e Expense) (Payout, error) { return Payout{ID: "po_" + e.ID}, nil },
}

// budget records the expenses whose budget was released.
var budget ledger

type fakeMailer struct{ sent ledger }

func (m *fakeMailer) Send(_ context.Context, e Email) error {
	m.sent.add(e.To + ": " + e.Subject)
	return nil
}

var mailer = &fakeMailer{}

// sendReceipt mails an order's receipt.
var sendReceipt = flow.Workflow[Receipt, struct{}]{
	Name: "send_receipt",
	Run: func(wc flow.Context, r Receipt) (struct{}, error) {
		_, err := flow.Do(wc, mailReceipt, r)
		return struct{}{}, err
	},
}

var mailReceipt = flow.Step[Receipt, struct{}]{
	Name: "mail_receipt",
	Run: func(ctx context.Context, r Receipt) (struct{}, error) {
		return struct{}{}, mailer.Send(ctx, Email{To: "customer", Subject: "receipt " + r.Charge})
	},
}

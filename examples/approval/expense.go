package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// Expense is the input of one approval run.
type Expense struct {
	ID          string `json:"id"`
	Employee    string `json:"employee"`
	Department  string `json:"department"`
	Manager     string `json:"manager"`
	Description string `json:"description"`
	Cents       int64  `json:"cents"`
}

// Decision is the payload of the "decision" signal a manager sends.
type Decision struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
	Note     string `json:"note,omitempty"`
}

// Payout is the output of an approved, paid expense.
type Payout struct {
	ExpenseID  string    `json:"expense_id"`
	TransferID string    `json:"transfer_id"`
	Cents      int64     `json:"cents"`
	ApprovedBy string    `json:"approved_by"`
	DecidedAt  time.Time `json:"decided_at"`
}

// decisionSignal is the name of the signal a manager's decision arrives as.
const decisionSignal = "decision"

// decisionTimeout is how long a manager has to decide.
const decisionTimeout = 48 * time.Hour

// Errors the workflow fails with. The engine records their messages, and
// Run.Result reports them in a *flow.RolledBackError.
var (
	errRejected   = errors.New("rejected")
	errNoDecision = errors.New("no decision")
)

// retry keeps retries short on the simulated clock: three attempts, 10
// minutes then 20 minutes apart, no jitter so that every run of the program
// shows the same times.
var retry = &flow.RetryPolicy{
	MaxAttempts:     3,
	InitialInterval: 10 * time.Minute,
	Coefficient:     2,
	MaxInterval:     time.Hour,
	Jitter:          -1,
}

// newApproval returns the workflow: reserve the budget, notify the manager,
// wait up to 48 hours for the decision, then pay out. A rejection, a
// timeout or an unaffordable expense fails the workflow, and the engine
// compensates what it did: the manager's task is withdrawn and the budget
// released.
func newApproval(svc *services) flow.Workflow[Expense, Payout] {
	reserve := flow.Step[Expense, Reservation]{
		Name: "reserve_budget",
		Run: func(_ context.Context, e Expense) (Reservation, error) {
			r, err := svc.budget.Reserve(e.ID, e.Department, e.Cents)
			if errors.Is(err, errOverBudget) {
				return r, flow.Permanent(err) // asking again will not make room
			}
			return r, err
		},
		Compensate: func(_ context.Context, _ Expense, r Reservation) error {
			return svc.budget.Release(r)
		},
		Retry: retry,
	}
	notify := flow.Step[Expense, Task]{
		Name: "notify_manager",
		Run: func(ctx context.Context, e Expense) (Task, error) {
			// The idempotency key makes a re-run after a crash find the task
			// it already opened instead of opening a second one.
			return svc.inbox.Open(flow.IdempotencyKey(ctx), e.Manager, e.ID,
				fmt.Sprintf("%s asks %s for %s", e.Employee, euros(e.Cents), e.Description))
		},
		Compensate: func(_ context.Context, _ Expense, t Task) error {
			return svc.inbox.Withdraw(t.ID)
		},
		Retry: retry,
	}
	payOut := flow.Step[Expense, Transfer]{
		Name: "pay_out",
		Run: func(_ context.Context, e Expense) (Transfer, error) {
			return svc.bank.Pay(e.ID, e.Employee, e.Cents)
		},
		// The last step: nothing after it can fail, so it needs no undo.
		Retry: retry,
	}
	return flow.Workflow[Expense, Payout]{
		Name: "expense_approval",
		Run: func(wc flow.Context, e Expense) (Payout, error) {
			if _, err := flow.Do(wc, reserve, e); err != nil {
				return Payout{}, err
			}
			if _, err := flow.Do(wc, notify, e); err != nil {
				return Payout{}, err
			}
			d, err := flow.Receive[Decision](wc, decisionSignal, decisionTimeout)
			if errors.Is(err, flow.ErrTimedOut) {
				return Payout{}, fmt.Errorf("%w from %s within %.0f hours", errNoDecision, e.Manager, decisionTimeout.Hours())
			}
			if err != nil {
				return Payout{}, err
			}
			if !d.Approved {
				return Payout{}, fmt.Errorf("%w by %s: %s", errRejected, d.By, d.Note)
			}
			decided, err := flow.Now(wc)
			if err != nil {
				return Payout{}, err
			}
			t, err := flow.Do(wc, payOut, e)
			if err != nil {
				return Payout{}, err
			}
			return Payout{ExpenseID: e.ID, TransferID: t.ID, Cents: t.Cents, ApprovedBy: d.By, DecidedAt: decided}, nil
		},
	}
}

package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// The simulated services live in this process so that what the approvals
// did, and undid, can be checked at the end. Each call is idempotent per
// expense, as calls from durable steps must be: a step may run again after a
// crash between its effect and its checkpoint.

// errOverBudget is a reservation the department cannot afford.
var errOverBudget = errors.New("over budget")

// services bundles the three simulated systems.
type services struct {
	budget *budget
	inbox  *inbox
	bank   *bank
}

// newServices returns the services of the story: two departments with
// €5,000 each, and a bank whose API fails once for erin's transfer.
func newServices() *services {
	return &services{
		budget: newBudget(map[string]int64{"engineering": 500_000, "sales": 500_000}),
		inbox:  newInbox(),
		bank:   newBank("erin"),
	}
}

// Reservation is money of a department's budget set aside for an expense.
type Reservation struct {
	ExpenseID  string `json:"expense_id"`
	Department string `json:"department"`
	Cents      int64  `json:"cents"`
}

// budget keeps each department's limit and the reservations against it.
type budget struct {
	mu       sync.Mutex
	limits   map[string]int64
	reserved map[string]Reservation // by expense ID
	released map[string]int         // release calls per expense that freed money
}

func newBudget(limits map[string]int64) *budget {
	return &budget{limits: limits, reserved: make(map[string]Reservation), released: make(map[string]int)}
}

// Reserve sets cents of dept's budget aside for an expense. Reserving again
// for the same expense returns the first reservation.
func (b *budget) Reserve(expenseID, dept string, cents int64) (Reservation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.reserved[expenseID]; ok {
		return r, nil
	}
	limit, ok := b.limits[dept]
	if !ok {
		return Reservation{}, fmt.Errorf("reserve for %s: no budget for department %q", expenseID, dept)
	}
	if left := limit - b.usedLocked(dept); cents > left {
		return Reservation{}, fmt.Errorf("reserve %s of %s for %s: %w (%s left)", euros(cents), dept, expenseID, errOverBudget, euros(left))
	}
	r := Reservation{ExpenseID: expenseID, Department: dept, Cents: cents}
	b.reserved[expenseID] = r
	return r, nil
}

// Release gives a reservation back. Releasing what is not reserved (any
// more) does nothing.
func (b *budget) Release(r Reservation) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.reserved[r.ExpenseID]; !ok {
		return nil
	}
	delete(b.reserved, r.ExpenseID)
	b.released[r.ExpenseID]++
	return nil
}

func (b *budget) usedLocked(dept string) int64 {
	var used int64
	for _, r := range b.reserved {
		if r.Department == dept {
			used += r.Cents
		}
	}
	return used
}

// Holds reports whether the budget holds a reservation for the expense.
func (b *budget) Holds(expenseID string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.reserved[expenseID]
	return ok
}

// Released returns how often a reservation of the expense was given back.
func (b *budget) Released(expenseID string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.released[expenseID]
}

// departmentBudget is one department's money.
type departmentBudget struct {
	Department   string
	Limit, Used  int64
	Reservations int
}

// Departments returns every department's budget, sorted by name.
func (b *budget) Departments() []departmentBudget {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []departmentBudget
	for _, d := range slices.Sorted(maps.Keys(b.limits)) {
		db := departmentBudget{Department: d, Limit: b.limits[d], Used: b.usedLocked(d)}
		for _, r := range b.reserved {
			if r.Department == d {
				db.Reservations++
			}
		}
		out = append(out, db)
	}
	return out
}

// Task is an approval request in a manager's inbox.
type Task struct {
	ID        string `json:"id"`
	Manager   string `json:"manager"`
	ExpenseID string `json:"expense_id"`
}

// Task states.
const (
	taskOpen      = "open"
	taskDecided   = "decided"   // the manager clicked approve or reject
	taskWithdrawn = "withdrawn" // the expense was rolled back before a decision
)

// inbox holds the managers' approval requests.
type inbox struct {
	mu    sync.Mutex
	tasks map[string]Task   // by ID
	state map[string]string // by task ID
	byKey map[string]string // idempotency key → task ID
	texts map[string]string // by task ID
}

func newInbox() *inbox {
	return &inbox{tasks: make(map[string]Task), state: make(map[string]string), byKey: make(map[string]string), texts: make(map[string]string)}
}

// Open puts an approval request in a manager's inbox. A second call with
// the same key returns the first task.
func (in *inbox) Open(key, manager, expenseID, text string) (Task, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if id, ok := in.byKey[key]; ok {
		return in.tasks[id], nil
	}
	t := Task{ID: fmt.Sprintf("task-%d", len(in.tasks)+1), Manager: manager, ExpenseID: expenseID}
	in.tasks[t.ID], in.state[t.ID], in.byKey[key], in.texts[t.ID] = t, taskOpen, t.ID, text
	return t, nil
}

// Withdraw takes an open approval request back, e.g. when it timed out. A
// decided task stays decided; withdrawing twice withdraws once.
func (in *inbox) Withdraw(taskID string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, ok := in.tasks[taskID]; !ok {
		return fmt.Errorf("withdraw %s: no such task", taskID)
	}
	if in.state[taskID] == taskOpen {
		in.state[taskID] = taskWithdrawn
	}
	return nil
}

// Decide records a manager's click on the open tasks of an expense and
// reports whether there was one: a withdrawn task cannot be decided.
func (in *inbox) Decide(expenseID string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	decided := false
	for id, t := range in.tasks {
		if t.ExpenseID == expenseID && in.state[id] == taskOpen {
			in.state[id] = taskDecided
			decided = true
		}
	}
	return decided
}

// Tasks returns the tasks opened for an expense with their states.
func (in *inbox) Tasks(expenseID string) map[string]string {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[string]string)
	for id, t := range in.tasks {
		if t.ExpenseID == expenseID {
			out[id] = in.state[id]
		}
	}
	return out
}

// Transfer is money paid out to an employee.
type Transfer struct {
	ID        string `json:"id"`
	ExpenseID string `json:"expense_id"`
	Employee  string `json:"employee"`
	Cents     int64  `json:"cents"`
}

// bank pays expenses out; its API fails the first call for some employees.
type bank struct {
	mu        sync.Mutex
	flaky     map[string]bool
	calls     map[string]int // by expense ID
	transfers map[string]Transfer
}

func newBank(flaky ...string) *bank {
	b := &bank{flaky: make(map[string]bool), calls: make(map[string]int), transfers: make(map[string]Transfer)}
	for _, e := range flaky {
		b.flaky[e] = true
	}
	return b
}

// Pay transfers cents to an employee for an expense. Paying an expense
// twice returns the first transfer.
func (b *bank) Pay(expenseID, employee string, cents int64) (Transfer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls[expenseID]++
	if t, ok := b.transfers[expenseID]; ok {
		return t, nil
	}
	if b.flaky[employee] && b.calls[expenseID] == 1 {
		return Transfer{}, errors.New("bank API: 503 service unavailable")
	}
	t := Transfer{ID: "tr-" + expenseID, ExpenseID: expenseID, Employee: employee, Cents: cents}
	b.transfers[expenseID] = t
	return t, nil
}

// Paid returns the transfer of an expense.
func (b *bank) Paid(expenseID string) (Transfer, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.transfers[expenseID]
	return t, ok
}

// Calls returns how often Pay was called for an expense.
func (b *bank) Calls(expenseID string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[expenseID]
}

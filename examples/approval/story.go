package main

import "time"

// simStart is when the simulated week begins: Monday 09:00, when everyone
// submits last week's expenses.
var simStart = time.Date(2025, 3, 3, 9, 0, 0, 0, time.UTC)

// expenses are submitted together at simStart. Their outcomes follow from
// the managers' actions below:
//
//   - exp-001: maria approves after 2 hours: paid;
//   - exp-002: tom rejects it the next morning: the budget is released;
//   - exp-003: nina never answers: after 48 hours it is rejected, her task
//     withdrawn and the budget released;
//   - exp-004: sara approves 30 minutes before the deadline: paid;
//   - exp-005: sara approves, and double-clicks: the second signal has the
//     same key and is dropped. The bank's API fails once; the payout is
//     retried 10 minutes later: paid;
//   - exp-006: more than the sales budget holds: rolled back at once, the
//     manager is never asked;
//   - exp-007: oscar approves after 50 hours, too late: the expense was
//     rolled back at 48 hours, and his signal is refused.
var expenses = []Expense{
	{ID: "exp-001", Employee: "alice", Department: "engineering", Manager: "maria", Description: "taxi to the airport", Cents: 4250},
	{ID: "exp-002", Employee: "bob", Department: "engineering", Manager: "tom", Description: "conference ticket", Cents: 185_000},
	{ID: "exp-003", Employee: "carol", Department: "engineering", Manager: "nina", Description: "a second monitor", Cents: 38_900},
	{ID: "exp-004", Employee: "dave", Department: "sales", Manager: "sara", Description: "client dinner", Cents: 23_600},
	{ID: "exp-005", Employee: "erin", Department: "sales", Manager: "sara", Description: "hotel, two nights", Cents: 61_200},
	{ID: "exp-006", Employee: "frank", Department: "sales", Manager: "sara", Description: "trade-show booth", Cents: 640_000},
	{ID: "exp-007", Employee: "grace", Department: "engineering", Manager: "oscar", Description: "training course", Cents: 90_000},
}

// action is a manager sending a decision at a simulated time.
type action struct {
	At       time.Duration // since simStart
	Expense  string
	Decision Decision
	Key      string // idempotency key of the signal: one per click of a button
}

// script is what the managers do, in time order. Nina never acts.
var script = []action{
	{At: 2 * time.Hour, Expense: "exp-001", Decision: Decision{Approved: true, By: "maria"}, Key: "maria/exp-001/approve"},
	{At: 5 * time.Hour, Expense: "exp-005", Decision: Decision{Approved: true, By: "sara"}, Key: "sara/exp-005/approve"},
	{At: 5*time.Hour + 2*time.Second, Expense: "exp-005", Decision: Decision{Approved: true, By: "sara"}, Key: "sara/exp-005/approve"},
	{At: 24 * time.Hour, Expense: "exp-002", Decision: Decision{Approved: false, By: "tom", Note: "not in this quarter's plan"}, Key: "tom/exp-002/reject"},
	{At: 47*time.Hour + 30*time.Minute, Expense: "exp-004", Decision: Decision{Approved: true, By: "sara"}, Key: "sara/exp-004/approve"},
	{At: 50 * time.Hour, Expense: "exp-007", Decision: Decision{Approved: true, By: "oscar"}, Key: "oscar/exp-007/approve"},
}

// storyEnd is how far the clock runs: past every decision and timeout.
const storyEnd = 72 * time.Hour

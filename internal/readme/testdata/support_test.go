// Tests of the approve handler of docs/workflows.md (its expense paid once
// approved) and of the welcome and invoice jobs of docs/jobs.md; internal/readme's test
// copies this file next to the docs' code.

package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// An approval, sent twice with one key, pays after the cooling-off hour.
func TestExpenseApprovedIsPaid(t *testing.T) {
	env := flowtest.New(t, nil)
	env.WaitLimit = 5 * time.Second
	ctx := context.Background()
	run := flowtest.Start(env, expense, Expense{ID: "e2", Cents: 900}, nil)
	for i, want := range []bool{true, false} {
		sent, err := approve(ctx, env.Engine, run.ID(), "req-1")
		if err != nil || sent != want {
			t.Fatalf("approve #%d = %v, %v; want %v", i+1, sent, err, want)
		}
	}
	out, err := flowtest.Await(env, run)
	if err != nil || out.ID != "po_e2" {
		t.Fatalf("Await = %+v, %v", out, err)
	}
}

// The welcome job runs on an engine that works the "mail" queue, once per
// user.
func TestWelcomeEmailIsSentOnce(t *testing.T) {
	env := flowtest.New(t, &flow.Config{Queues: map[string]flow.QueueConfig{"mail": {}}})
	env.WaitLimit = 5 * time.Second
	flow.RegisterJob(env.Engine, sendEmail)
	ctx := context.Background()
	run, err := welcome(ctx, env.Engine, "u1", Email{To: "ada@example.com", Subject: "welcome"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := welcome(ctx, env.Engine, "u1", Email{To: "ada@example.com", Subject: "welcome"})
	if err != nil || !again.Existing() || again.ID() != run.ID() {
		t.Fatalf("second welcome = %v, %v; want the first run", again, err)
	}
	if _, err := flowtest.Await(env, run); err != nil {
		t.Fatal(err)
	}
	if got := mailer.sent.list(); !slices.Equal(got, []string{"ada@example.com: welcome"}) {
		t.Fatalf("sent %q", got)
	}
}

// The invoice job keeps a lean record: its history reads whole, three of
// its events derived (negative IDs).
func TestLeanInvoiceHistoryIsWhole(t *testing.T) {
	env := flowtest.New(t, &flow.Config{Queues: map[string]flow.QueueConfig{"mail": {}}})
	env.WaitLimit = 5 * time.Second
	flow.RegisterJob(env.Engine, sendInvoice)
	ctx := context.Background()
	run, err := flow.Enqueue(ctx, env.Engine, sendInvoice, Email{To: "ada@example.com", Subject: "invoice"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flowtest.Await(env, run); err != nil {
		t.Fatal(err)
	}
	events, err := env.Engine.History(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	derived := 0
	for _, ev := range events {
		kinds = append(kinds, ev.Kind)
		if ev.ID < 0 {
			derived++
		}
	}
	want := []string{flow.EventRunStarted, flow.EventRunClaimed, flow.EventStepStarted, flow.EventStepCompleted, flow.EventRunCompleted}
	if !slices.Equal(kinds, want) || derived != 3 {
		t.Fatalf("history %v with %d derived events; want %v with 3", kinds, derived, want)
	}
}

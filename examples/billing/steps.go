package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/flowlite/flowlite/flow"
)

// The step types, named by flowdefgen's conventions: uses: open_batch
// takes an OpenBatchInput and gives an OpenBatchOutput, and so on.

type OpenBatchInput struct {
	Customer string `json:"customer"`
}

type OpenBatchOutput struct {
	Batch string `json:"batch"`
}

type PriceLineInput struct {
	Batch string `json:"batch"`
	Line  string `json:"line"`
}

type PriceLineOutput struct {
	Cents int `json:"cents"`
}

type PostTotalInput struct {
	Batch string `json:"batch"`
	Cents int    `json:"cents"`
}

type PostTotalOutput struct {
	Cents int `json:"cents"`
}

type NotifyInput struct {
	Customer string `json:"customer"`
	Cents    int    `json:"cents"`
}

type NotifyOutput struct {
	Sent bool `json:"sent"`
}

// prices are what each line costs, in cents.
var prices = map[string]int{"widget": 250, "gadget": 125}

// steps implements BillingSteps, the interface flowdefgen generates:
// a method per step (open_batch → OpenBatch) and per named compensation
// (void_batch → VoidBatch).
type steps struct {
	mu     sync.Mutex
	log    []string
	voided []string
}

func (s *steps) note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, fmt.Sprintf(format, args...))
}

func (s *steps) OpenBatch(ctx context.Context, in OpenBatchInput) (OpenBatchOutput, error) {
	return OpenBatchOutput{Batch: "batch-" + in.Customer}, nil
}

func (s *steps) VoidBatch(ctx context.Context, in OpenBatchInput, out OpenBatchOutput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.voided = append(s.voided, out.Batch)
	return nil
}

func (s *steps) PriceLine(ctx context.Context, in PriceLineInput) (PriceLineOutput, error) {
	cents, ok := prices[in.Line]
	if !ok {
		return PriceLineOutput{}, flow.Permanent(fmt.Errorf("no price for %q", in.Line))
	}
	return PriceLineOutput{Cents: cents}, nil
}

func (s *steps) PostTotal(ctx context.Context, in PostTotalInput) (PostTotalOutput, error) {
	return PostTotalOutput{Cents: in.Cents}, nil
}

func (s *steps) Notify(ctx context.Context, in NotifyInput) (NotifyOutput, error) {
	s.note("notified %s of %d cents", in.Customer, in.Cents)
	return NotifyOutput{Sent: true}, nil
}

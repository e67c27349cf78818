package store

import (
	"context"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// WorkflowReader reads the workflow versions engines registered.
type WorkflowReader interface {
	WorkflowList(ctx context.Context) ([]flowtype.WorkflowKey, error)
}

// WorkflowTx registers workflow versions inside a write transaction.
type WorkflowTx interface {
	WorkflowRegister(ctx context.Context, k flowtype.WorkflowKey, now int64) error
}

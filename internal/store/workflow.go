package store

import (
	"context"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// WorkflowKey identifies one version of a workflow. It is defined in
// flow/flowtype, where go doc shows its fields.
type WorkflowKey = flowtype.WorkflowKey

// WorkflowReader reads the workflow versions engines registered.
type WorkflowReader interface {
	WorkflowList(ctx context.Context) ([]WorkflowKey, error)
}

// WorkflowTx registers workflow versions inside a write transaction.
type WorkflowTx interface {
	WorkflowRegister(ctx context.Context, k WorkflowKey, now int64) error
}

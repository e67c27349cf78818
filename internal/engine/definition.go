package engine

import (
	"context"
	"database/sql"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// WorkflowFunc runs a workflow body: it decodes the input, calls steps
// through rc, and returns the encoded output.
type WorkflowFunc func(rc *RunContext, input []byte) ([]byte, error)

// Workflow is the untyped definition of one workflow version.
type Workflow struct {
	Key flowtype.WorkflowKey
	Run WorkflowFunc
	// FirstStep, when its Name is set, is the step every run of the
	// workflow calls first, at the top level, with the recorded input
	// FirstStep.Input: a job's one step. The claim of a fresh run then
	// records the step's first attempt in its own transaction (see
	// claimIn), and the execution skips the write that would record it:
	// one transaction fewer per run, and one commit less between the
	// claim and the body.
	FirstStep FirstStep
}

// FirstStep names the step a workflow always calls first; see
// Workflow.FirstStep.
type FirstStep struct {
	Name  string
	Input []byte
	// Lean keeps a lean record of the runs (flow.LeanRecord): the claim
	// that begins the step's first attempt stores neither its run_claimed
	// nor its step_started event, nor that attempt's completion its
	// step_completed; reads derive them from the run's and the step's rows
	// (derived.go).
	Lean bool
}

// StepFunc runs one attempt of a step body. tx is the engine's write
// transaction for transactional steps, nil otherwise.
type StepFunc func(ctx context.Context, tx *sql.Tx) ([]byte, error)

// CompensateFunc undoes a completed step given its recorded input and output.
type CompensateFunc func(ctx context.Context, input, output []byte) error

// Step is the untyped definition of one step call.
type Step struct {
	Name            string
	Input           []byte // encoded input, stored with the step
	Run             StepFunc
	Transactional   bool // Run receives the write transaction of its checkpoint
	Compensate      CompensateFunc
	Retry           flowtype.RetryPolicy
	CompensateRetry flowtype.RetryPolicy
	Timeout         time.Duration // per attempt; zero means none
	// RateLimit, when set (its Name resolved), bounds the attempts that
	// begin per period (see steprate.go).
	RateLimit *flowtype.StepRateLimit
}

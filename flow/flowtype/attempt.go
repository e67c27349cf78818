package flowtype

import "context"

// AttemptInfo describes a step or compensation attempt to an Interceptor,
// and is what flow.Attempt returns inside a step body.
type AttemptInfo struct {
	// RunID is the run the attempt belongs to.
	RunID string
	// Workflow is the workflow version the run is pinned to.
	Workflow WorkflowKey
	// Step is the step's name, prefixed with its branch when it was called
	// in a branch of flow.All.
	Step string
	// Occurrence counts the earlier calls of this step name in the run (or
	// branch), from 0.
	Occurrence int
	// Attempt numbers the attempts of this call, from 1.
	Attempt int
	// Compensation is true when the attempt runs the step's compensation
	// rather than the step.
	Compensation bool
}

// Interceptor wraps every step and compensation attempt, e.g. for tracing
// or to inject failures in tests. It must call call to run the body, or
// return an error instead; the error it returns is the attempt's error,
// retried like any other.
type Interceptor func(ctx context.Context, info AttemptInfo, call func(context.Context) error) error

package flow

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/codec"
	"github.com/flowlite/flowlite/internal/engine"
)

// RetryPolicy says how often and how fast a failed step or compensation is
// attempted again: MaxAttempts in total, waiting InitialInterval ×
// Coefficient^(n-1), capped at MaxInterval, spread by ±Jitter (a negative
// Jitter turns it off). Zero fields take Config.DefaultRetry, whose own zero
// fields take 5 attempts, 1s, ×2, 1m and ±20%. See [flowtype.RetryPolicy] for
// its fields.
type RetryPolicy = flowtype.RetryPolicy

// Step is a typed unit of work with a stable name.
//
// Name is persisted with every checkpoint: never derive it from a Go type
// name, and never reuse it for a step of other types. Exactly one of Run and
// RunTx is set. Both may run more than once (see the package doc), so make
// their side effects idempotent.
type Step[In, Out any] struct {
	// Name identifies the step within a workflow, persisted.
	Name string
	// Run performs the step.
	Run func(ctx context.Context, in In) (Out, error)
	// RunTx performs the step inside the engine's write transaction: its
	// writes through tx commit together with the step's checkpoint, or not
	// at all. Keep it short: it holds the database's single writer.
	//
	// tx is shared with other callers' writes (group commit), so ctx cannot
	// interrupt a statement once it started (with Open; an interrupt would
	// roll back the others' work too): a statement started before ctx
	// ended runs to its end, the next one fails with ctx's error, and an
	// attempt that returns after ctx ended (its Timeout, a cancel, a stop)
	// fails with that error, its writes rolled back.
	//
	// The body is called once per attempt, never more: every call is an
	// attempt the run's record counts (StepRecord.Attempts; flow.Attempt
	// gives its number), so what the body does outside tx happens as often
	// as the record says, and an attempt its worker stopped before it
	// called the body (a crash, a lost lease) counts without a call. When
	// the transaction is lost after the body ran (on a pool the caller
	// opened, flowsqlite.New, a Timeout interrupts the body's statement,
	// which rolls back the whole shared transaction; or its commit fails),
	// the body is not called again within that attempt: the attempt fails
	// or is interrupted, and the next one, counted, calls it again.
	RunTx func(ctx context.Context, tx *sql.Tx, in In) (Out, error)
	// Compensate, when set, undoes a completed step. It receives the step's
	// recorded input and output, may run more than once, and must tolerate
	// an effect that is already undone.
	Compensate func(ctx context.Context, in In, out Out) error
	// Retry is the step's retry policy; nil takes Config.DefaultRetry.
	Retry *RetryPolicy
	// CompensateRetry is the compensation's retry policy; nil takes Retry.
	CompensateRetry *RetryPolicy
	// Timeout bounds each attempt (and each compensation attempt) through
	// its context; zero means no bound.
	Timeout time.Duration
	// RateLimit, when set, bounds how many attempts of the step (and of
	// every step naming the same limiter) begin per period across every
	// engine of the database, for a step that calls a rate-limited API. A
	// run whose attempt the limit holds back waits as a pending row,
	// holding no worker slot, and tries again when a start frees up. Steps
	// sharing a limiter must declare the same Rate. See
	// [flowtype.StepRateLimit] and docs/jobs.md.
	RateLimit *StepRateLimit
}

// StepRateLimit bounds the attempts of a step per period across engines.
type StepRateLimit = flowtype.StepRateLimit

// definition builds the engine's untyped view of one call of s with in.
func (s Step[In, Out]) definition(runID string, in In, def RetryPolicy) (engine.Step, error) {
	switch {
	case s.Name == "":
		return engine.Step{}, &engine.DefinitionError{RunID: runID, Problem: "a step has no Name"}
	case (s.Run == nil) == (s.RunTx == nil):
		return engine.Step{}, &engine.DefinitionError{RunID: runID, Problem: fmt.Sprintf("step %s must set exactly one of Run and RunTx", s.Name)}
	}
	var rate *flowtype.StepRateLimit
	if s.RateLimit != nil {
		if err := s.RateLimit.Validate(s.Name); err != nil {
			return engine.Step{}, &engine.DefinitionError{RunID: runID, Problem: err.Error()}
		}
		l := *s.RateLimit
		if l.Name == "" {
			l.Name = s.Name
		} else if err := engine.CheckName("rate limiter", l.Name); err != nil {
			return engine.Step{}, &engine.DefinitionError{RunID: runID, Problem: fmt.Sprintf("step %s: %v", s.Name, err)}
		}
		rate = &l
	}
	input, err := codec.Encode(in)
	if err != nil {
		return engine.Step{}, &engine.DefinitionError{RunID: runID, Problem: fmt.Sprintf("step %s: %v", s.Name, err)}
	}
	retry := def
	if s.Retry != nil {
		retry = s.Retry.WithDefaults(def)
	}
	compRetry := retry
	if s.CompensateRetry != nil {
		compRetry = s.CompensateRetry.WithDefaults(def)
	}
	d := engine.Step{
		Name: s.Name, Input: input, Transactional: s.RunTx != nil,
		Retry: retry, CompensateRetry: compRetry, Timeout: s.Timeout, RateLimit: rate,
		Run: func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
			var out Out
			var err error
			if s.RunTx != nil {
				out, err = s.RunTx(ctx, tx, in)
			} else {
				out, err = s.Run(ctx, in) // its stream writes commit with its outcome (engine/stream.go)
			}
			if err != nil {
				return nil, err
			}
			b, err := codec.Encode(out)
			if err != nil {
				return nil, Permanent(fmt.Errorf("step %s: %w", s.Name, err))
			}
			return b, nil
		},
	}
	if s.Compensate != nil {
		d.Compensate = func(ctx context.Context, input, output []byte) error {
			in, err := codec.Decode[In](input)
			if err != nil {
				return Permanent(&DecodeError{RunID: runID, Step: s.Name, What: "input", Type: codec.TypeName[In](), Err: err})
			}
			out, err := codec.Decode[Out](output)
			if err != nil {
				return Permanent(&DecodeError{RunID: runID, Step: s.Name, What: "output", Type: codec.TypeName[Out](), Err: err})
			}
			return s.Compensate(ctx, in, out)
		}
	}
	return d, nil
}

// Attempt returns the step attempt that ctx belongs to: run, step,
// occurrence, attempt number, and whether it is the compensation. ok is
// false outside a step body.
func Attempt(ctx context.Context) (info AttemptInfo, ok bool) {
	return engine.AttemptFrom(ctx)
}

// IdempotencyKey returns a key that identifies the current step call across
// all its attempts and resumes: "RUN/STEP#OCCURRENCE", with a "/compensate"
// suffix inside a compensation. Pass it to services that deduplicate
// requests, so that a step re-run after a crash does not repeat its effect.
// It is empty outside a step body.
func IdempotencyKey(ctx context.Context) string {
	info, ok := engine.AttemptFrom(ctx)
	if !ok {
		return ""
	}
	key := fmt.Sprintf("%s/%s#%d", info.RunID, info.Step, info.Occurrence)
	if info.Compensation {
		key += "/compensate"
	}
	return key
}

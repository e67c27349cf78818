package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
)

// RunStatus is the state of a run. See [flowtype.RunStatus] for the states
// and their transitions.
type RunStatus = flowtype.RunStatus

// Run states; see [flowtype.StatusPending] and the others for what each
// means.
const (
	StatusPending      = flowtype.StatusPending
	StatusRunning      = flowtype.StatusRunning
	StatusWaiting      = flowtype.StatusWaiting
	StatusCompensating = flowtype.StatusCompensating
	StatusCompleted    = flowtype.StatusCompleted
	StatusFailed       = flowtype.StatusFailed
	StatusSuspended    = flowtype.StatusSuspended
	StatusCancelled    = flowtype.StatusCancelled
)

// RunInfo is a run as recorded.
type RunInfo struct {
	ID              string
	Workflow        string
	Version         int
	Queue           string
	Priority        int
	Status          RunStatus
	Input           json.RawMessage
	Output          json.RawMessage
	Error           string // the workflow's error, once it failed
	Reason          string // why the run is suspended
	CancelRequested bool
	RunAt           time.Time // when the run is (next) due
	Deadline        time.Time // zero: none
	ParentID        string    // the run that started this one as a child
	CreatedAt       time.Time
	UpdatedAt       time.Time
	FinishedAt      time.Time // zero until finished
	StartedAt       time.Time // first claimed; zero until then
	UniqueKey       string    // see EnqueueOptions
	ConcurrencyKey  string    // see StartOptions
	RequeuedFrom    string    // the dead letter this run requeues
	RequeuedAs      string    // the run that requeued this dead letter
	Steps           []StepRecord

	// Timeout is StartOptions.Timeout: until the run's first claim it has
	// no deadline from it, and from then on Deadline includes it.
	Timeout time.Duration
	// Detached is ChildOptions.Detached: the child outlives its parent's
	// cancellation.
	Detached bool
	// Values are the context values the run carries (see WithValue); nil
	// for none.
	Values map[string]string
	// Execution is the number of the run's current execution: 1 until it
	// first continued as new (ContinueAsNew), and one more each time;
	// Steps are that execution's. ContinuedAt is when it began (zero in
	// the first).
	Execution   int
	ContinuedAt time.Time
}

// StepRecord is one step call of a run as recorded.
type StepRecord struct {
	Name                 string
	Occurrence           int
	Status               string // running, retrying, waiting, completed, failed
	Attempts             int
	Input                json.RawMessage
	Output               json.RawMessage
	Error                string
	Compensation         string // none, pending, running, retrying, completed, failed, skipped
	CompensationAttempts int
	CompensationError    string
	StartedAt            time.Time
	FinishedAt           time.Time
	// Progress is the latest progress its current attempt reported (see
	// SetProgress): of the attempt running, or the last one's once the step
	// ended; nil when that attempt reported none.
	Progress *Progress
}

// Event kinds of a run's history; see [flowtype.EventRunStarted] and the
// constants after it for what each one records.
const (
	EventRunStarted            = flowtype.EventRunStarted
	EventRunClaimed            = flowtype.EventRunClaimed
	EventRunReleased           = flowtype.EventRunReleased
	EventRunWaiting            = flowtype.EventRunWaiting
	EventTimerStarted          = flowtype.EventTimerStarted
	EventTimerFired            = flowtype.EventTimerFired
	EventSignalSent            = flowtype.EventSignalSent
	EventSignalWaiting         = flowtype.EventSignalWaiting
	EventSignalReceived        = flowtype.EventSignalReceived
	EventSignalRejected        = flowtype.EventSignalRejected
	EventSignalTimedOut        = flowtype.EventSignalTimedOut
	EventChildStarted          = flowtype.EventChildStarted
	EventChildWaiting          = flowtype.EventChildWaiting
	EventChildFinished         = flowtype.EventChildFinished
	EventRaceWon               = flowtype.EventRaceWon
	EventScopeCancelled        = flowtype.EventScopeCancelled
	EventRunRescued            = flowtype.EventRunRescued
	EventStepStarted           = flowtype.EventStepStarted
	EventStepCompleted         = flowtype.EventStepCompleted
	EventStepRetried           = flowtype.EventStepRetried
	EventStepFailed            = flowtype.EventStepFailed
	EventWorkflowFailed        = flowtype.EventWorkflowFailed
	EventCompensationStarted   = flowtype.EventCompensationStarted
	EventCompensationCompleted = flowtype.EventCompensationCompleted
	EventCompensationRetried   = flowtype.EventCompensationRetried
	EventCompensationFailed    = flowtype.EventCompensationFailed
	EventCompensationSkipped   = flowtype.EventCompensationSkipped
	EventCancelRequested       = flowtype.EventCancelRequested
	EventRunResumed            = flowtype.EventRunResumed
	EventRunCompleted          = flowtype.EventRunCompleted
	EventRunFailed             = flowtype.EventRunFailed
	EventRunSuspended          = flowtype.EventRunSuspended
	EventRunCancelled          = flowtype.EventRunCancelled
	EventScheduleFired         = flowtype.EventScheduleFired
)

// Event is one entry of a run's history; Kind is one of the Event* kinds.
// An event a job's lean record did not store (LeanRecord) is derived from
// the run's and its step's records when the history is read: its ID is
// negative, and it is not in the change feed.
type Event struct {
	ID         int64
	At         time.Time
	Kind       string
	Step       string
	Occurrence int
	Attempt    int
	Detail     string
}

// RunFilter selects runs; zero fields match all.
type RunFilter struct {
	Status   RunStatus
	Workflow string
	Queue    string
	Since    time.Time // created at or after; zero: no bound
	Until    time.Time // created before; zero: no bound
	// IDPrefix keeps the runs whose ID starts with it.
	IDPrefix string
	// ErrorText keeps the runs whose error or reason (of a suspended run)
	// holds it, ignoring ASCII case.
	ErrorText string
	// InputField and InputValue keep the runs whose input is a JSON object
	// with the top-level field InputField whose value reads InputValue: a
	// string's own text, a number as written, true, false or null. A
	// field name holding a quote or a backslash is refused.
	//
	// No index serves these three: they read every run the other fields
	// leave (Limit bounds the answer, not the work), which a person's
	// search can afford and a hot path should not rely on.
	InputField, InputValue string
	Limit                  int // default 100
}

// WaitingWorkflow counts ready runs of a workflow version this engine does
// not register; they are left alone until an engine that has it runs.
type WaitingWorkflow struct {
	Workflow string
	Version  int
	Runs     int64
}

// Inspect returns a run with its steps, read from one snapshot of the
// database: the run and its steps as they stood at one instant, never the
// run before a change joined with its steps after it (such as a run still
// pending and due now whose step already failed and waits for its next
// attempt).
func (e *Engine) Inspect(ctx context.Context, runID string) (RunInfo, error) {
	return byRun(e, runID, func(inner *Engine) (RunInfo, error) {
		var info RunInfo
		err := inner.store.Read(ctx, func(r store.Reader) error {
			var err error
			info, err = readRun(ctx, r, runID)
			return err
		})
		return info, err
	})
}

// InspectWithHistory returns what Inspect and History return, read from
// one snapshot: the history ends with the event that brought the run to
// the state it shows, as a page that shows both (the dashboard's run page)
// needs. An unknown run is ErrRunNotFound.
func (e *Engine) InspectWithHistory(ctx context.Context, runID string) (RunInfo, []Event, error) {
	type both struct {
		info   RunInfo
		events []Event
	}
	b, err := byRun(e, runID, func(inner *Engine) (both, error) {
		var b both
		err := inner.store.Read(ctx, func(r store.Reader) error {
			var err error
			if b.info, err = readRun(ctx, r, runID); err != nil {
				return err
			}
			b.events, err = readHistory(ctx, r, runID)
			return err
		})
		return b, err
	})
	return b.info, b.events, err
}

// readRun reads a run with its steps through r.
func readRun(ctx context.Context, r store.Reader, runID string) (RunInfo, error) {
	run, err := r.RunGet(ctx, runID)
	if err != nil {
		return RunInfo{}, err
	}
	steps, err := r.StepList(ctx, runID)
	if err != nil {
		return RunInfo{}, err
	}
	ex, err := r.ExecutionGet(ctx, runID)
	if err != nil {
		return RunInfo{}, err
	}
	info := runInfo(run)
	info.Execution, info.ContinuedAt = ex.Number, millis(ex.ContinuedAt)
	for _, s := range steps {
		info.Steps = append(info.Steps, stepRecord(s))
	}
	progress, err := r.EventListKind(ctx, runID, flowtype.EventStepProgress)
	if err != nil {
		return RunInfo{}, err
	}
	attachProgress(&info, latestProgress(progress))
	return info, nil
}

func stepRecord(s store.Step) StepRecord {
	return StepRecord{
		Name: s.Name, Occurrence: s.Occurrence, Status: string(s.Status), Attempts: s.Attempts,
		Input: raw(s.Input), Output: raw(s.Output), Error: s.Error,
		Compensation: string(s.Compensation), CompensationAttempts: s.CompensationAttempts,
		CompensationError: s.CompensationError, StartedAt: millis(s.StartedAt), FinishedAt: millis(s.FinishedAt),
	}
}

// History returns the events of a run, oldest first. An unknown run is
// ErrRunNotFound: the run is read with its events, from one snapshot.
func (e *Engine) History(ctx context.Context, runID string) ([]Event, error) {
	return byRun(e, runID, func(inner *Engine) ([]Event, error) {
		var events []Event
		err := inner.store.Read(ctx, func(r store.Reader) error {
			var err error
			events, err = readHistory(ctx, r, runID)
			return err
		})
		return events, err
	})
}

// readHistory reads the history of a run through r, with the events a
// lean record leaves out derived (engine.DeriveLean). An unknown run is
// ErrRunNotFound.
func readHistory(ctx context.Context, r store.Reader, runID string) ([]Event, error) {
	run, err := r.RunGet(ctx, runID)
	if err != nil {
		return nil, err
	}
	events, err := r.EventList(ctx, runID)
	if err != nil {
		return nil, err
	}
	if engine.IsLean(run, events) {
		steps, err := r.StepList(ctx, runID)
		if err != nil {
			return nil, err
		}
		events = engine.DeriveLean(run, steps, events)
	}
	out := make([]Event, len(events))
	for i, ev := range events {
		out[i] = Event{ID: ev.ID, At: millis(ev.At), Kind: ev.Kind, Step: ev.Step,
			Occurrence: ev.Occurrence, Attempt: ev.Attempt, Detail: ev.Detail}
	}
	return out, nil
}

// ListRuns returns runs, newest first, without their steps.
func (e *Engine) ListRuns(ctx context.Context, f RunFilter) ([]RunInfo, error) {
	if strings.ContainsAny(f.InputField, "\"\\") {
		return nil, fmt.Errorf("list runs: input field %q: a field name holds no quote or backslash", f.InputField)
	}
	if f.InputField == "" && f.InputValue != "" {
		return nil, fmt.Errorf("list runs: input value %q without an input field", f.InputValue)
	}
	runs, err := gather(ctx, e, func(ctx context.Context, inner *Engine) ([]store.Run, error) {
		return inner.store.Reader().RunList(ctx, store.RunListParams{
			Status: f.Status, Workflow: f.Workflow, Queue: f.Queue, Limit: f.Limit,
			Since: unixMillis(f.Since), Before: unixMillis(f.Until),
			IDPrefix: f.IDPrefix, ErrorText: f.ErrorText, InputField: f.InputField, InputValue: f.InputValue,
		})
	}, newestRuns(f.Limit))
	if err != nil {
		return nil, err
	}
	out := make([]RunInfo, len(runs))
	for i, r := range runs {
		out[i] = runInfo(r)
	}
	return out, nil
}

// CountRuns returns how many runs are in each state.
func (e *Engine) CountRuns(ctx context.Context) (map[RunStatus]int64, error) {
	return gather(ctx, e, func(ctx context.Context, inner *Engine) (map[RunStatus]int64, error) {
		return inner.store.Reader().RunCountByStatus(ctx)
	}, mergeCounts)
}

// Waiting lists ready runs of workflow versions this engine does not
// register. The engine also logs them once a minute.
func (e *Engine) Waiting(ctx context.Context) ([]WaitingWorkflow, error) {
	counts, err := gather(ctx, e, func(ctx context.Context, inner *Engine) ([]store.UnrunnableCount, error) {
		return inner.core.Unrunnable(ctx)
	}, mergeUnrunnable)
	if err != nil {
		return nil, fmt.Errorf("count waiting runs: %w", err)
	}
	out := make([]WaitingWorkflow, len(counts))
	for i, c := range counts {
		out[i] = WaitingWorkflow{Workflow: c.Workflow.Name, Version: c.Workflow.Version, Runs: c.Runs}
	}
	return out, nil
}

func runInfo(r store.Run) RunInfo {
	return RunInfo{
		ID: r.ID, Workflow: r.Workflow, Version: r.Version, Queue: r.Queue, Priority: r.Priority,
		Status: r.Status, Input: raw(r.Input), Output: raw(r.Output), Error: r.Error, Reason: r.Reason,
		CancelRequested: r.CancelRequested, RunAt: millis(r.RunAt), Deadline: millis(r.Deadline),
		ParentID: r.ParentID, CreatedAt: millis(r.CreatedAt),
		UpdatedAt: millis(r.UpdatedAt), FinishedAt: millis(r.FinishedAt),
		StartedAt: millis(r.StartedAt), UniqueKey: r.UniqueKey, RequeuedFrom: r.RequeuedFrom, RequeuedAs: r.RequeuedAs,
		Timeout: time.Duration(r.Timeout) * time.Millisecond, Detached: r.Detached, Values: recordedValues(r.Context),
		ConcurrencyKey: r.ConcurrencyKey,
	}
}

func raw(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

func unixMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func millis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

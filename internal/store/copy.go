package store

import (
	"fmt"
	"strings"
)

// A Snapshot is the whole content of a database that `flowlite copy`
// carries to another backend: every run, step, event, signal, schedule,
// unique hold, queue, registered workflow, workflow definition, debounce key,
// execution number, stream and stream message, each slice in the order the
// rows were written (streams by run and name, messages by stream and
// position). Engine reports and checkpoint records are not in it:
// they describe the processes of the old database. Times are Unix ms;
// nullable columns are pointers (nil: NULL).
type Snapshot struct {
	Runs        []CopyRun
	Steps       []CopyStep
	Events      []CopyEvent
	Signals     []CopySignal
	Schedules   []CopySchedule
	UniqueHolds []CopyUniqueHold
	Queues      []CopyQueue
	Workflows   []CopyWorkflow
	Definitions []CopyDefinition
	Debounces   []CopyDebounce
	Executions  []CopyExecution
	// Streams are the streams rows: their lengths are the positions the
	// next appends take, so they are carried as they are, not recounted.
	Streams      []CopyStream
	StreamChunks []CopyStreamChunk
}

// CopyRun is one row of the runs table.
type CopyRun struct {
	ID, Workflow, Queue, Status string
	Version, Priority           int64
	Input, Output               []byte
	Error, Reason               string
	CancelRequested             bool
	RunAt                       int64
	Deadline                    *int64
	ParentID                    *string
	WakeSeq, Fence              int64
	LeaseOwner                  *string
	LeaseExpiresAt              *int64
	CreatedAt, UpdatedAt        int64
	FinishedAt                  *int64
	UniqueKey                   *string
	UniqueStates                int64
	StartedAt                   *int64
	RequeuedFrom, RequeuedAs    *string
	Timeout                     *int64
	Detached                    bool
	ContextValues               []byte
	ConcurrencyKey              string
}

// CopyStep is one row of the steps table.
type CopyStep struct {
	RunID, Name          string
	Occurrence           int64
	Status               string
	Attempts             int64
	Input, Output        []byte
	Error                string
	CompletedSeq         *int64
	Compensable          bool
	Compensation         string
	CompensationAttempts int64
	CompensationError    string
	StartedAt            int64
	FinishedAt, Position *int64
	ErrorCode            string
	ErrorPermanent       bool
	ErrorDetails         []byte
}

// CopyEvent is one row of the events table (its id is not carried: the
// target numbers events anew, in the same order).
type CopyEvent struct {
	RunID               string
	At                  int64
	Kind, Step          string
	Occurrence, Attempt int64
	Detail              string
}

// CopySignal is one row of the signals table (its id is not carried).
type CopySignal struct {
	RunID, Name string
	Payload     []byte
	Key         *string
	SentAt      int64
	ConsumedBy  *string
}

// CopySchedule is one row of the schedules table.
type CopySchedule struct {
	Name, Workflow       string
	Version              int64
	Queue                string
	Priority             int64
	Input                []byte
	Spec, CatchUp        string
	Paused               bool
	NextAt, LastSlot     int64
	CreatedAt, UpdatedAt int64
}

// CopyUniqueHold is one row of the unique_holds table.
type CopyUniqueHold struct {
	Workflow, Key, RunID       string
	TakenAt, HeldUntil, States int64
}

// CopyDebounce is one row of the debounces table.
type CopyDebounce struct {
	Workflow, Key, RunID string
	FirstAt, MaxDelay    int64
}

// CopyExecution is one row of the executions table (continue-as-new).
type CopyExecution struct {
	RunID                  string
	Execution, ContinuedAt int64
}

// CopyStream is one row of the streams table: a run's stream, its length
// (the next message's position) and when it was closed (0: open).
type CopyStream struct {
	RunID, Stream    string
	Length, ClosedAt int64
}

// CopyStreamChunk is one row of the stream_chunks table: Count messages
// from position FirstPosition on, as written (carried: readers resume by
// position).
type CopyStreamChunk struct {
	RunID, Stream        string
	FirstPosition, Count int64
	Messages             []byte
	At                   int64
	Step                 string
	Occurrence, Attempt  int64
}

// CopyQueue is one row of the queues table.
type CopyQueue struct {
	Name                 string
	Paused               bool
	CreatedAt, UpdatedAt int64
}

// CopyWorkflow is one row of the workflows table.
type CopyWorkflow struct {
	Name                  string
	Version, RegisteredAt int64
}

// CopyDefinition is one row of the definitions table.
type CopyDefinition struct {
	Name, Hash, File     string
	Version              int64
	Body                 []byte
	CreatedAt, UpdatedAt int64
}

// CopyCounts is the number of rows of each table a copy carries.
type CopyCounts struct {
	Runs, Steps, Events, Signals, Schedules, UniqueHolds, Queues, Workflows, Definitions int64
	Debounces, Executions, Streams, StreamChunks                                         int64
}

// Counts returns the number of rows of each table in s.
func (s *Snapshot) Counts() CopyCounts {
	return CopyCounts{
		Runs: int64(len(s.Runs)), Steps: int64(len(s.Steps)), Events: int64(len(s.Events)),
		Signals: int64(len(s.Signals)), Schedules: int64(len(s.Schedules)),
		UniqueHolds: int64(len(s.UniqueHolds)), Queues: int64(len(s.Queues)),
		Workflows: int64(len(s.Workflows)), Definitions: int64(len(s.Definitions)),
		Debounces: int64(len(s.Debounces)), Executions: int64(len(s.Executions)),
		Streams: int64(len(s.Streams)), StreamChunks: int64(len(s.StreamChunks)),
	}
}

// Tables returns the counts by table name, in a fixed order.
func (c CopyCounts) Tables() []TableCount {
	return []TableCount{
		{"runs", c.Runs}, {"steps", c.Steps}, {"events", c.Events}, {"signals", c.Signals},
		{"schedules", c.Schedules}, {"unique_holds", c.UniqueHolds}, {"queues", c.Queues},
		{"workflows", c.Workflows}, {"definitions", c.Definitions}, {"debounces", c.Debounces},
		{"executions", c.Executions}, {"streams", c.Streams}, {"stream_chunks", c.StreamChunks},
	}
}

// TableCount is the number of rows of one table.
type TableCount struct {
	Table string
	Rows  int64
}

// Mismatch describes the tables whose counts differ between want and got
// ("" when none does), e.g. "runs: 3 expected, 2 found".
func (c CopyCounts) Mismatch(got CopyCounts) string {
	var diffs []string
	g := got.Tables()
	for i, w := range c.Tables() {
		if w.Rows != g[i].Rows {
			diffs = append(diffs, fmt.Sprintf("%s: %d expected, %d found", w.Table, w.Rows, g[i].Rows))
		}
	}
	return strings.Join(diffs, "; ")
}

// Empty reports whether c counts no row in any table.
func (c CopyCounts) Empty() bool { return c == CopyCounts{} }

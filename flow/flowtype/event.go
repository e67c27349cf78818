package flowtype

// Event kinds: the Kind of each entry of a run's history (flow.Event), in
// the order a run meets them. Tools that read the history (flowlite
// history, the dashboard, SQL over the events table) see these strings.
const (
	// EventRunStarted: the run was recorded (Start, Enqueue, a child
	// start, a schedule); Detail says where it waits.
	EventRunStarted = "run_started"
	// EventRunClaimed: a worker took the run; Detail names it.
	EventRunClaimed = "run_claimed"
	// EventRunReleased: the worker gave the run back, due again later (a
	// retry backoff, the engine stopping).
	EventRunReleased = "run_released"
	// EventRunWaiting: the run waits for a timer, a signal or a child, and
	// holds no worker.
	EventRunWaiting = "run_waiting"
	// EventRunRescued: the run's lease expired (its worker died or stalled)
	// and it was re-queued for another worker.
	EventRunRescued = "run_rescued"
	// EventStepStarted: an attempt of a step began; Attempt numbers it.
	EventStepStarted = "step_started"
	// EventStepCompleted: a step's output was checkpointed.
	EventStepCompleted = "step_completed"
	// EventStepRetried: an attempt failed and another follows; Detail has
	// the error and the backoff.
	EventStepRetried = "step_retried"
	// EventStepFailed: a step failed for good; Detail has the error.
	EventStepFailed = "step_failed"
	// EventWorkflowFailed: the workflow body returned an error (or the run
	// was cancelled) and the unwind begins.
	EventWorkflowFailed = "workflow_failed"
	// EventCompensationStarted: an attempt of a step's compensation began.
	EventCompensationStarted = "compensation_started"
	// EventCompensationCompleted: a step's compensation succeeded.
	EventCompensationCompleted = "compensation_completed"
	// EventCompensationRetried: a compensation attempt failed and another
	// follows.
	EventCompensationRetried = "compensation_retried"
	// EventCompensationFailed: a compensation exhausted its attempts; the
	// run is suspended.
	EventCompensationFailed = "compensation_failed"
	// EventCompensationSkipped: an operator skipped a failed compensation.
	EventCompensationSkipped = "compensation_skipped"
	// EventCancelRequested: cancellation of the run was asked for.
	EventCancelRequested = "cancel_requested"
	// EventTimerStarted: the run began a durable sleep; Detail has its end.
	EventTimerStarted = "timer_started"
	// EventTimerFired: a durable sleep ended.
	EventTimerFired = "timer_fired"
	// EventSignalSent: a signal was sent to the run.
	EventSignalSent = "signal_sent"
	// EventSignalWaiting: the run began waiting for a signal.
	EventSignalWaiting = "signal_waiting"
	// EventSignalReceived: the run received a signal.
	EventSignalReceived = "signal_received"
	// EventSignalRejected: a signal the run waited for was set aside
	// because its payload does not decode into the type flow.Receive
	// expects; the run keeps waiting for the next signal of that name.
	// Detail names the signal and why it was rejected.
	EventSignalRejected = "signal_rejected"
	// EventSignalTimedOut: a signal wait passed its timeout.
	EventSignalTimedOut = "signal_timed_out"
	// EventChildStarted: the run started a child run; Detail has its ID.
	EventChildStarted = "child_started"
	// EventChildWaiting: the run began waiting for a child run.
	EventChildWaiting = "child_waiting"
	// EventChildFinished: a child run the run waited for finished.
	EventChildFinished = "child_finished"
	// EventRaceWon: a branch of flow.First won; Detail names it.
	EventRaceWon = "race_won"
	// EventScopeCancelled: the workflow body cancelled a cancellation
	// scope (flow.WithCancel); Step names the scope's record
	// ("<scope>/flow.cancel") and Detail lists what the cancel ended:
	// waits, steps waiting out a retry, and children, whose own
	// step_failed and cancel_requested events follow.
	EventScopeCancelled = "scope_cancelled"
	// EventRunResumed: an operator resumed the suspended run.
	EventRunResumed = "run_resumed"
	// EventRunCompleted: the run completed.
	EventRunCompleted = "run_completed"
	// EventRunFailed: the run failed and its steps were compensated.
	EventRunFailed = "run_failed"
	// EventRunSuspended: the run waits for an operator; Detail says why.
	EventRunSuspended = "run_suspended"
	// EventRunCancelled: the run was cancelled.
	EventRunCancelled = "run_cancelled"
	// EventStepSnoozed: a step (a job's handler) snoozed itself, without
	// using an attempt; Detail: "snoozed for <d>".
	EventStepSnoozed = "step_snoozed"
	// EventStreamWritten: a batch of messages was appended to a stream of
	// the run; Step names the stream-write step of the body, or the step
	// whose attempt (Occurrence, Attempt) wrote them; Detail: "<stream>
	// [first, last]", the batch's positions.
	EventStreamWritten = "stream_written"
	// EventStreamClosed: the body closed a stream; Detail names it.
	EventStreamClosed = "stream_closed"
	// EventRunMadeDue: an operator made a delayed or backing-off run due
	// now; Detail says when it was due.
	EventRunMadeDue = "run_made_due"
	// EventRunRequeued: a dead letter was requeued; Detail names the new
	// run, whose run_started event names the dead letter.
	EventRunRequeued = "run_requeued"
	// EventRunRescheduled: an operator gave a pending run a new due time
	// (Engine.RunAt); Detail says when it is due and when it was.
	EventRunRescheduled = "run_rescheduled"
	// EventRunReset: an operator reset the run to an earlier call of its
	// history (Engine.Reset) or brought a cancelled or failed run back
	// (Engine.Revive): it is pending again under its own ID, keeping the
	// records of the calls before that one. Detail names the call and
	// ends with "; discarded: " and a JSON array of the calls whose
	// records went ("name#occurrence"), which run again.
	EventRunReset = "run_reset"
	// EventRunForked: an operator forked the run from one of its calls
	// (Engine.Fork); Detail names the new run and the call. The new run's
	// run_started event names this run and ends with "; copied: " and a
	// JSON array of the calls whose records it was given.
	EventRunForked = "run_forked"
	// EventRunDebounced: a start with the pending run's debounce key was
	// merged into it (Debounce): Detail says whether the start replaced
	// the run's input and when the run is due now, or was dropped.
	EventRunDebounced = "run_debounced"
	// EventContinuedAsNew: the workflow body continued as new
	// (flow.ContinueAsNew): the run's execution ended and the next began
	// under the same ID, with a new input and no step records. Occurrence
	// is the new execution's number; Detail says how many calls the ended
	// one recorded and ends with "; discarded: " and a JSON array of them
	// ("name#occurrence"), as run_reset's does.
	EventContinuedAsNew = "continued_as_new"
	// EventScheduleFired: a schedule's slot started the run, right after
	// its run_started; Detail names the schedule and the slot.
	EventScheduleFired = "schedule_fired"
)

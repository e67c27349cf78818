package engine

// Event kinds recorded in a run's history.
const (
	EventRunStarted            = "run_started"
	EventRunClaimed            = "run_claimed"
	EventRunReleased           = "run_released"
	EventRunRescued            = "run_rescued"
	EventStepStarted           = "step_started"
	EventStepCompleted         = "step_completed"
	EventStepRetried           = "step_retried"
	EventStepFailed            = "step_failed"
	EventWorkflowFailed        = "workflow_failed"
	EventCompensationStarted   = "compensation_started"
	EventCompensationCompleted = "compensation_completed"
	EventCompensationRetried   = "compensation_retried"
	EventCompensationFailed    = "compensation_failed"
	EventCompensationSkipped   = "compensation_skipped"
	EventCancelRequested       = "cancel_requested"
	EventRunResumed            = "run_resumed"
	EventRunCompleted          = "run_completed"
	EventRunFailed             = "run_failed"
	EventRunSuspended          = "run_suspended"
	EventRunCancelled          = "run_cancelled"
)

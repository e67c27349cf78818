package engine

import "github.com/flowlite/flowlite/flow/flowtype"

// Event kinds recorded in a run's history; flowtype documents each.
const (
	EventRunStarted            = flowtype.EventRunStarted
	EventRunClaimed            = flowtype.EventRunClaimed
	EventRunReleased           = flowtype.EventRunReleased
	EventRunWaiting            = flowtype.EventRunWaiting
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
	EventRunResumed            = flowtype.EventRunResumed
	EventRunCompleted          = flowtype.EventRunCompleted
	EventRunFailed             = flowtype.EventRunFailed
	EventRunSuspended          = flowtype.EventRunSuspended
	EventRunCancelled          = flowtype.EventRunCancelled
	EventScheduleFired         = flowtype.EventScheduleFired
)

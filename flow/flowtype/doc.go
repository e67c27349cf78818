// Package flowtype holds the plain types of package flow's API: the errors
// a run or a step call returns, the retry policy, run states, the attempt
// an Interceptor sees, maintenance settings and results, and metrics
// snapshots.
//
// Package flow re-exports them under the same names (for example
// flow.RetryPolicy is flowtype.RetryPolicy), so user code keeps writing
// flow.X; WorkflowKey is reached through AttemptInfo.Workflow. They are
// defined here rather than in flow's internal
// packages so that go doc and pkg.go.dev can show their fields, methods and
// constants: run
//
//	go doc github.com/flowlite/flowlite/flow/flowtype.RetryPolicy
//
// to read a type that flow's documentation refers to.
//
// flowtype imports only the standard library, nothing from flowlite, so the
// engine's internals can share these definitions without an import cycle,
// and a program can name these types without linking the engine.
package flowtype

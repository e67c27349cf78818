package flowtest

// Executions returns the number of the run's current execution: 1 until it
// first continued as new (flow.ContinueAsNew), one more each time since.
// A workflow that continues as new runs under Await like any other: the
// new execution is due at once, and its waits pass on the manual clock.
func (env *Env) Executions(runID string) int {
	env.t.Helper()
	return env.Inspect(runID).Execution
}

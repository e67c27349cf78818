package flowtest

import (
	"encoding/json"

	"github.com/flowlite/flowlite/flow"
)

// Published returns the values the run has published (flow.Publish),
// latest per key, as recorded (JSON), or fails the test.
func (env *Env) Published(runID string) map[string]json.RawMessage {
	env.t.Helper()
	return flow.Published(env.Inspect(runID))
}

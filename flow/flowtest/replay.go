package flowtest

import (
	"context"
	"fmt"
	"os"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowhistory"
)

// Replay replays an exported history (flowlite history RUN --export, or
// flow.Engine.ExportHistory) against wf, the workflow code as it is now,
// and returns the first divergence (see flow.Engine.Replay): the safety
// net before deploying a changed workflow without a new Version. Every
// call the history recorded returns its recorded outcome; no step body,
// compensation or RunTx runs and nothing is written.
//
// wf must have the history's workflow name and version. Replay registers
// it in env unless a workflow of that name and version is registered there
// already, in which case that one replays: replay each variant of a
// workflow in an Env of its own.
func Replay[In, Out any](env *Env, wf flow.Workflow[In, Out], h *flowhistory.History) (flow.ReplayReport, error) {
	env.t.Helper()
	version := wf.Version
	if version == 0 {
		version = 1
	}
	if h.Run.Workflow != wf.Name || h.Run.Version != version {
		return flow.ReplayReport{}, fmt.Errorf("replay run %s: the history is of workflow %s version %d, not %s version %d",
			h.Run.ID, h.Run.Workflow, h.Run.Version, wf.Name, version)
	}
	Register(env, wf)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	return env.Engine.Replay(ctx, h)
}

// ReplayFile reads the history file at path and replays it against wf (see
// Replay). A file that is not a history of a known format version is an
// error matching flowhistory.ErrFormat that names the file.
func ReplayFile[In, Out any](env *Env, wf flow.Workflow[In, Out], path string) (flow.ReplayReport, error) {
	env.t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return flow.ReplayReport{}, fmt.Errorf("replay: %w", err)
	}
	defer f.Close()
	h, err := flowhistory.Read(f)
	if err != nil {
		return flow.ReplayReport{}, fmt.Errorf("replay %s: %w", path, err)
	}
	return Replay(env, wf, h)
}

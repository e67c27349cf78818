package engine

import (
	"context"
	"time"

	"github.com/flowlite/flowlite/internal/store"
)

// runUnrunnableReporter logs, once a minute, the ready runs this process
// leaves alone because it lacks their workflow version.
func (e *Engine) runUnrunnableReporter(ctx context.Context) {
	report := func() {
		counts, err := e.Unrunnable(ctx)
		if err != nil && ctx.Err() == nil {
			e.log.Error("count unrunnable runs", "err", err)
		}
		for _, c := range counts {
			e.log.Warn("runs wait for a workflow version this process does not register; they are left alone",
				"workflow", c.Workflow.Name, "version", c.Workflow.Version, "runs", c.Runs)
		}
	}
	report()
	every(ctx, time.Minute, report)
}

// Unrunnable counts ready runs whose workflow version is not registered here.
func (e *Engine) Unrunnable(ctx context.Context) ([]store.UnrunnableCount, error) {
	return e.store.Reader().RunCountUnrunnable(ctx, e.Known())
}

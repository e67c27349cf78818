package dashboard

import (
	"context"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/metrics"
)

// fileHealth is the health of the engine's file, or of a shard set's files
// together (see metrics.FileHealth), which the overview shows as /metrics
// reports it.
func (d *Dashboard) fileHealth(ctx context.Context) (flow.FileHealth, error) {
	return metrics.FileHealth(ctx, d.e)
}

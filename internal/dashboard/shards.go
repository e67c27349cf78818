package dashboard

import (
	"context"
	"fmt"
	"strings"

	"github.com/flowlite/flowlite/flow"
)

// fileHealth is the engine's FileHealth, or on a sharded engine (whose
// FileHealth names no single file) the health of its files together: the
// paths joined by commas, the sizes and counts summed, and the last
// checkpoint of the shard that checkpointed least recently, so that a
// shard whose checkpoints stall shows on the overview and in metrics.
func (d *Dashboard) fileHealth(ctx context.Context) (flow.FileHealth, error) {
	n := d.e.Shards()
	if n == 1 {
		return d.e.FileHealth(ctx)
	}
	var sum flow.FileHealth
	paths := make([]string, n)
	for i := range n {
		h, err := d.e.Shard(i).FileHealth(ctx)
		if err != nil {
			return flow.FileHealth{}, fmt.Errorf("shard %d: %w", i, err)
		}
		paths[i] = h.Path
		if i == 0 || h.LastCheckpoint.Before(sum.LastCheckpoint) {
			sum.LastCheckpoint, sum.LastCheckpointBy, sum.LastCheckpointMode = h.LastCheckpoint, h.LastCheckpointBy, h.LastCheckpointMode
			sum.LastCheckpointWALBytes, sum.LastCheckpointBusy, sum.LastCheckpointError = h.LastCheckpointWALBytes, h.LastCheckpointBusy, h.LastCheckpointError
		}
		sum.DBBytes += h.DBBytes
		sum.WALBytes += h.WALBytes
		sum.WALLimit += h.WALLimit
		sum.PeakWALBytes += h.PeakWALBytes
		sum.Checkpoints += h.Checkpoints
		sum.Forced += h.Forced
		sum.WALFrames += h.WALFrames
	}
	sum.Path = strings.Join(paths, ",")
	return sum, nil
}

package metrics

import (
	"context"
	"fmt"
	"strings"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtype"
)

// FileHealth is the engine's FileHealth, or on a sharded engine (whose
// FileHealth names no single file) the health of its files together: the
// paths joined by commas, the sizes and counts summed, and the last
// checkpoint of the shard that checkpointed least recently, so that a
// shard whose checkpoints stall shows on the dashboard and in metrics.
func FileHealth(ctx context.Context, e *flow.Engine) (flow.FileHealth, error) {
	n := e.Shards()
	if n == 1 {
		return e.FileHealth(ctx)
	}
	var sum flow.FileHealth
	paths := make([]string, n)
	for i := range n {
		h, err := e.Shard(i).FileHealth(ctx)
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
		switch {
		case i == 0:
			sum.Checkpointer = h.Checkpointer
		case sum.Checkpointer != h.Checkpointer:
			sum.Checkpointer = "mixed"
		}
		sum.Replication = worseReplica(sum.Replication, h.Replication)
	}
	sum.Path = strings.Join(paths, ",")
	return sum, nil
}

// worseReplica is the replica of a set that is furthest behind, with the
// set's errors added up, so that one shard whose replica stalls shows.
func worseReplica(a, b *flowtype.ReplicationHealth) *flowtype.ReplicationHealth {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	w := *a
	if b.Lag > a.Lag || (b.Lag == a.Lag && b.LastSync.Before(a.LastSync)) {
		w = *b
	}
	w.Errors = a.Errors + b.Errors
	if b.LastErrorAt.After(a.LastErrorAt) {
		w.LastError, w.LastErrorAt = b.LastError, b.LastErrorAt
	} else {
		w.LastError, w.LastErrorAt = a.LastError, a.LastErrorAt
	}
	if b.ReportedAt.Before(a.ReportedAt) {
		w.ReportedAt = b.ReportedAt // the stalest figures of the set
	} else {
		w.ReportedAt = a.ReportedAt
	}
	return &w
}

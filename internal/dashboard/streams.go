package dashboard

import (
	"context"
	"encoding/json"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// streamTailSize is how many of a stream's last messages the run page
// shows.
const streamTailSize = 10

// streamTailWait bounds the reads of a run page's stream tails.
const streamTailWait = 5 * time.Second

// streamTail is a stream of a run as the run page shows it: its length,
// whether it is closed, and its last messages.
type streamTail struct {
	flow.StreamInfo
	Tail []flow.StreamMessage[json.RawMessage]
}

// streamTails returns the streams of run runID with their last messages,
// or none when they cannot be read (the page shows the rest of the run).
func (d *Dashboard) streamTails(runID string) []streamTail {
	ctx, cancel := context.WithTimeout(context.Background(), streamTailWait)
	defer cancel()
	streams, err := flow.Streams(ctx, d.e, runID)
	if err != nil {
		d.log.Warn("dashboard: read the streams of a run", "run", runID, "err", err)
		return nil
	}
	out := make([]streamTail, 0, len(streams))
	for _, s := range streams {
		tail, err := flow.StreamMessages[json.RawMessage](ctx, d.e, runID, s.Name, max(0, s.Length-streamTailSize))
		if err != nil {
			d.log.Warn("dashboard: read the tail of a stream", "run", runID, "stream", s.Name, "err", err)
			return nil
		}
		out = append(out, streamTail{StreamInfo: s, Tail: tail})
	}
	return out
}

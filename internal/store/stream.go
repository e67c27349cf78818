package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// ErrStreamClosed is returned by StreamAppend when the stream was closed.
var ErrStreamClosed = flowtype.ErrStreamClosed

// Stream is one named stream of a run: how many messages it holds and
// whether it was closed.
type Stream struct {
	RunID    string
	Name     string
	Length   int64 // the next message's position
	ClosedAt int64 // Unix ms; 0 while open
}

// StreamMessage is one message of a stream, at its position.
type StreamMessage struct {
	RunID    string
	Stream   string
	Position int64
	Value    []byte // JSON
	At       int64
	// Step, Occurrence and Attempt name the step attempt whose body wrote
	// the message; Step is empty for a message of the workflow body.
	Step       string
	Occurrence int
	Attempt    int
}

// StreamAppendParams appends Values, in order, to a stream of a run.
type StreamAppendParams struct {
	RunID      string
	Stream     string
	Values     [][]byte
	At         int64
	Step       string
	Occurrence int
	Attempt    int
}

// StreamReader reads the streams of runs.
type StreamReader interface {
	// StreamRead returns up to max messages of a stream from position from
	// on, in position order. Positions are dense: a read that returns
	// position n returned or can return every position below it.
	StreamRead(ctx context.Context, runID, stream string, from int64, max int) ([]StreamMessage, error)
	// StreamList returns the streams of a run, by name.
	StreamList(ctx context.Context, runID string) ([]Stream, error)
}

// StreamTx writes the streams of runs.
type StreamTx interface {
	// StreamAppend appends p.Values at the end of the stream, creating it
	// on its first append, and returns the position of the first one. The
	// positions of one stream are dense and ordered (0, 1, 2...) and
	// handed out in commit order: a transaction appending to a stream
	// another one appends to waits for it (pgstore locks the stream's
	// row), so a reader never sees position n+1 before n. A closed stream
	// takes nothing: ErrStreamClosed.
	StreamAppend(ctx context.Context, p StreamAppendParams) (int64, error)
	// StreamClose closes a stream, creating it empty when it has no
	// messages; closing it again changes nothing.
	StreamClose(ctx context.Context, runID, stream string, now int64) error
}

// StreamChunk is one append of a stream as the adapters store it: Count
// messages from position First on, in Messages, a JSON array of them
// (EncodeStreamChunk). One row per append, not per message, keeps a step
// that writes thousands of messages from paying a row insert for each.
type StreamChunk struct {
	RunID      string
	Stream     string
	First      int64
	Count      int64
	Messages   []byte
	At         int64
	Step       string
	Occurrence int
	Attempt    int
}

// EncodeStreamChunk encodes values, each a JSON document, as the JSON
// array a chunk stores. Each value must be valid JSON: the array is the
// values joined, so a broken one would break its neighbours' reads.
func EncodeStreamChunk(values [][]byte) ([]byte, error) {
	n := 2 + len(values)
	for _, v := range values {
		n += len(v)
	}
	doc := make([]byte, 0, n)
	doc = append(doc, '[')
	for i, v := range values {
		if !json.Valid(v) {
			return nil, fmt.Errorf("stream message %d of %d is not valid JSON", i+1, len(values))
		}
		if i > 0 {
			doc = append(doc, ',')
		}
		doc = append(doc, v...)
	}
	return append(doc, ']'), nil
}

// streamReadChunks is how many chunks ReadStreamChunks asks for at a time.
const streamReadChunks = 32

// ReadStreamChunks returns up to most messages of a stream from position
// from on, in position order, reading them with fetch: fetch returns up
// to chunks chunks in position order from the one holding position from
// (the adapters' StreamRead query).
func ReadStreamChunks(from int64, most int, fetch func(from int64, chunks int) ([]StreamChunk, error)) ([]StreamMessage, error) {
	var out []StreamMessage
	for len(out) < most {
		chunks, err := fetch(from, streamReadChunks)
		if err != nil {
			return nil, err
		}
		for _, c := range chunks {
			var values []json.RawMessage
			if err := json.Unmarshal(c.Messages, &values); err != nil {
				return nil, fmt.Errorf("stream %q of run %s: chunk at position %d: %w", c.Stream, c.RunID, c.First, err)
			}
			if int64(len(values)) != c.Count {
				return nil, fmt.Errorf("stream %q of run %s: chunk at position %d holds %d messages, its row says %d", c.Stream, c.RunID, c.First, len(values), c.Count)
			}
			for i, v := range values {
				pos := c.First + int64(i)
				if pos < from || len(out) == most {
					continue
				}
				out = append(out, StreamMessage{RunID: c.RunID, Stream: c.Stream, Position: pos, Value: v, At: c.At,
					Step: c.Step, Occurrence: c.Occurrence, Attempt: c.Attempt})
			}
		}
		if len(chunks) < streamReadChunks {
			break
		}
		last := chunks[len(chunks)-1]
		from = max(from, last.First+last.Count)
	}
	return out, nil
}

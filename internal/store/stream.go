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

// streamMessageRow is one message of the JSON document adapters insert
// a batch with.
type streamMessageRow struct {
	Position int64  `json:"position"`
	Value    string `json:"value"`
}

// StreamMessagesJSON encodes values, at positions first, first+1..., as
// the JSON array the adapters' StreamMessagesInsert reads.
func StreamMessagesJSON(first int64, values [][]byte) ([]byte, error) {
	rows := make([]streamMessageRow, len(values))
	for i, v := range values {
		rows[i] = streamMessageRow{Position: first + int64(i), Value: string(v)}
	}
	doc, err := json.Marshal(rows)
	if err != nil {
		return nil, fmt.Errorf("encode %d stream messages: %w", len(values), err)
	}
	return doc, nil
}

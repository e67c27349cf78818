package flow

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/codec"
	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
)

// Streams (DBOS WriteStream/ReadStream, Hatchet put_stream): a run
// appends messages to a named stream (an LLM's tokens, a pipeline's log
// lines) and clients read them in order, resuming by position.
//
// Positions of one stream of one run are dense and ordered: 0, 1, 2…, each
// handed out once, in the order the appends commit, on SQLite and on
// PostgreSQL alike. A reader that resumes from the position after the
// last one it handled sees every message once, and never a position
// before a smaller one commits.
//
// Writes of the workflow body (WriteStream) happen exactly once: each is
// recorded as a step (named StreamStepPrefix+stream) in the transaction
// that appends the message, and a replay gets the position back without
// appending again. Writes of a step body (WriteStreamCtx) are buffered
// and committed in batches, within engine.StreamFlushInterval (50ms) of a
// write and, at the latest, when the body returns, before the attempt's
// outcome is recorded; a flush that fails fails the attempt. They happen
// at least once per attempt: an attempt that fails or whose worker
// crashes after a flush leaves the messages it flushed in the stream, and
// the retry appends its own after them. Each message says which attempt
// wrote it (StreamMessage.Step, Occurrence, Attempt).
//
// A stream ends when the body closes it (CloseStream) or when the run
// finishes (completed, failed, cancelled): ReadStream stops there. Each
// batch is one stream_written event of the run's history (Detail names
// the stream and the batch's positions), so the history, the change
// feed, time travel and flowtest.ReplayFile show them. Streams are
// deleted with their run.

// StreamStepPrefix starts the name of the step that records a body's
// write to a stream; the stream's name follows.
const StreamStepPrefix = engine.StreamStepPrefix

// Event kinds of streams.
const (
	// EventStreamWritten: a batch of messages was appended to a stream;
	// Detail: "<stream> [first, last]", the batch's positions.
	EventStreamWritten = flowtype.EventStreamWritten
	// EventStreamClosed: the body closed a stream; Detail names it.
	EventStreamClosed = flowtype.EventStreamClosed
)

// ErrStreamClosed is returned by a write to a closed stream.
var ErrStreamClosed = store.ErrStreamClosed

// StreamMessage is one message of a stream, at its position.
type StreamMessage[T any] struct {
	Position int64
	Value    T
	At       time.Time
	// Step, Occurrence and Attempt name the step attempt that wrote the
	// message; Step is StreamStepPrefix+stream for a write of the body.
	Step       string
	Occurrence int
	Attempt    int
}

// StreamInfo describes one stream of a run.
type StreamInfo struct {
	Name   string
	Length int64 // how many messages it holds: the next one's position
	Closed bool  // closed by the body; the streams of a finished run end too
}

// WriteStream appends value to the run's stream name from the workflow
// body, exactly once, and returns its position. The name follows the
// rules of names, as a step's does.
func WriteStream[T any](wc Context, stream string, value T) (int64, error) {
	if stream == "" {
		return 0, fmt.Errorf("run %s: write stream: empty name", wc.RunID())
	}
	b, err := codec.Encode(value)
	if err != nil {
		return 0, fmt.Errorf("run %s: write stream %q: %w", wc.RunID(), stream, err)
	}
	return wc.runContext().StreamWrite(stream, b)
}

// WriteStreamCtx appends value to stream of the run whose step body ctx
// is the context of (a step's Run; not RunTx, whose transaction holds
// the writer, nor Compensate). The write is buffered and committed within
// 50ms, or when the body returns; it fails with the error of an earlier
// flush that failed, and with ErrStreamClosed once the stream was closed.
func WriteStreamCtx[T any](ctx context.Context, stream string, value T) error {
	if stream == "" {
		return fmt.Errorf("write stream: empty name")
	}
	b, err := codec.Encode(value)
	if err != nil {
		return fmt.Errorf("write stream %q: %w", stream, err)
	}
	return engine.WriteStreamStep(ctx, stream, b)
}

// CloseStream closes the run's stream name from the workflow body,
// exactly once: readers stop after its last message, and writes to it
// fail with ErrStreamClosed.
func CloseStream(wc Context, stream string) error {
	if stream == "" {
		return fmt.Errorf("run %s: close stream: empty name", wc.RunID())
	}
	return wc.runContext().StreamClose(stream)
}

// streamPage is how many messages one read of a stream fetches.
const streamPage = 256

// ReadStream returns the messages of the run's stream from position from
// on, in order, following new ones until the stream is closed, the run
// finishes, or ctx ends (then it yields ctx's error). It wakes at once
// for writes committed by this process and, on PostgreSQL, by any
// (LISTEN/NOTIFY); otherwise it looks at the engine's poll interval. A
// stream not written yet is waited for like an empty one. The iteration
// ends after an error.
func ReadStream[T any](ctx context.Context, e *Engine, runID, stream string, from int64) iter.Seq2[StreamMessage[T], error] {
	return func(yield func(StreamMessage[T], error) bool) {
		inner, err := runEngine(ctx, e, runID)
		if err != nil {
			yield(StreamMessage[T]{}, fmt.Errorf("read stream %q of run %s: %w", stream, runID, err))
			return
		}
		notify, _ := inner.store.(store.FeedNotifier)
		for {
			var woke <-chan struct{}
			if notify != nil {
				woke = notify.FeedCommitted() // before the reads: a commit after them wakes it
			}
			// The end is read before the messages, so the messages read
			// after it include every one written before it.
			ended, err := streamEnded(ctx, inner.store.Reader(), runID, stream)
			if err != nil {
				yield(StreamMessage[T]{}, fmt.Errorf("read stream %q of run %s: %w", stream, runID, err))
				return
			}
			msgs, err := readStream[T](ctx, inner.store.Reader(), runID, stream, from, streamPage)
			if err != nil {
				yield(StreamMessage[T]{}, err)
				return
			}
			for _, m := range msgs {
				if !yield(m, nil) {
					return
				}
				from = m.Position + 1
			}
			if len(msgs) == streamPage {
				continue
			}
			if ended {
				return
			}
			timer := time.NewTimer(e.core.Config().PollInterval)
			select {
			case <-ctx.Done():
				timer.Stop()
				yield(StreamMessage[T]{}, fmt.Errorf("read stream %q of run %s: %w", stream, runID, ctx.Err()))
				return
			case <-woke:
				timer.Stop()
			case <-timer.C:
			}
		}
	}
}

// StreamMessages returns the messages of the run's stream from position
// from on that are committed now, without waiting.
func StreamMessages[T any](ctx context.Context, e *Engine, runID, stream string, from int64) ([]StreamMessage[T], error) {
	inner, err := runEngine(ctx, e, runID)
	if err != nil {
		return nil, fmt.Errorf("read stream %q of run %s: %w", stream, runID, err)
	}
	var out []StreamMessage[T]
	for {
		msgs, err := readStream[T](ctx, inner.store.Reader(), runID, stream, from, streamPage)
		if err != nil {
			return nil, err
		}
		out = append(out, msgs...)
		if len(msgs) < streamPage {
			return out, nil
		}
		from = msgs[len(msgs)-1].Position + 1
	}
}

// Streams lists the streams of a run, by name.
func Streams(ctx context.Context, e *Engine, runID string) ([]StreamInfo, error) {
	return byRun(e, runID, func(inner *Engine) ([]StreamInfo, error) {
		if _, err := inner.store.Reader().RunGet(ctx, runID); err != nil {
			return nil, fmt.Errorf("list streams of run %s: %w", runID, err)
		}
		return listStreams(ctx, inner.store.Reader(), runID)
	})
}

func listStreams(ctx context.Context, r store.Reader, runID string) ([]StreamInfo, error) {
	ss, err := r.StreamList(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := make([]StreamInfo, len(ss))
	for i, s := range ss {
		out[i] = StreamInfo{Name: s.Name, Length: s.Length, Closed: s.ClosedAt > 0}
	}
	return out, nil
}

// runEngine returns the inner engine whose store holds runID.
func runEngine(ctx context.Context, e *Engine, runID string) (*Engine, error) {
	return byRun(e, runID, func(inner *Engine) (*Engine, error) {
		if _, err := inner.store.Reader().RunGet(ctx, runID); err != nil {
			return nil, err
		}
		return inner, nil
	})
}

// streamEnded reports whether the stream was closed or its run finished.
func streamEnded(ctx context.Context, r store.Reader, runID, stream string) (bool, error) {
	run, err := r.RunGet(ctx, runID)
	if err != nil {
		return false, err
	}
	if run.Status.Finished() {
		return true, nil
	}
	ss, err := r.StreamList(ctx, runID)
	if err != nil {
		return false, err
	}
	for _, s := range ss {
		if s.Name == stream {
			return s.ClosedAt > 0, nil
		}
	}
	return false, nil
}

func readStream[T any](ctx context.Context, r store.Reader, runID, stream string, from int64, max int) ([]StreamMessage[T], error) {
	rows, err := r.StreamRead(ctx, runID, stream, from, max)
	if err != nil {
		return nil, fmt.Errorf("read stream %q of run %s: %w", stream, runID, err)
	}
	out := make([]StreamMessage[T], len(rows))
	for i, m := range rows {
		v, err := codec.Decode[T](m.Value)
		if err != nil {
			return nil, &DecodeError{RunID: runID, Step: m.Step, What: fmt.Sprintf("message %d of stream %q", m.Position, stream), Type: codec.TypeName[T](), Err: err}
		}
		step := m.Step
		if step == "" {
			step = StreamStepPrefix + stream
		}
		out[i] = StreamMessage[T]{Position: m.Position, Value: v, At: millis(m.At), Step: step, Occurrence: m.Occurrence, Attempt: m.Attempt}
	}
	return out, nil
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Streams: a run appends messages under a name and clients read them by
// position (store/stream.go).
//
// A write of the workflow body is a call of its own, recorded as a step
// named StreamStepPrefix+stream whose input is the message and whose
// output is its position, in the transaction that appends the message: a
// replay gets the position back and appends nothing, so the body's writes
// happen exactly once.
//
// A write of a step body is buffered per attempt and flushed, each
// stream's pending messages in one store.StreamAppend with one
// stream_written event, within StreamFlushInterval of the first unflushed
// write. Each flush commits on its own, fenced by the run's lease. What is
// pending when the body returns commits with the attempt's outcome: in
// the transaction of its checkpoint when it completed (streamBuffer.endCompleted;
// a step writing 1,000 messages at once thus pays no commit of its own),
// by streamBuffer.endFailed before its failure is recorded otherwise. An attempt
// that fails or is interrupted after a flush leaves the messages it
// flushed, and its retry appends its own after them. Step writes are thus
// at least once per attempt, and every message names the attempt that
// wrote it. Positions stay dense and ordered whatever happens: a reader
// that resumes by position sees each once.

// StreamStepPrefix starts the name of the step that records a body's
// write to a stream; the stream's name follows.
const StreamStepPrefix = "flow.stream."

// StreamCloseStepPrefix starts the name of the step that records a body's
// closing of a stream.
const StreamCloseStepPrefix = "flow.stream-close."

// StreamFlushInterval bounds how long a step's stream write waits for its
// batch to commit.
const StreamFlushInterval = 50 * time.Millisecond

// StreamWrite appends value (JSON) to stream from the workflow body and
// returns its position; a replay returns the recorded position.
func (rc *RunContext) StreamWrite(stream string, value []byte) (int64, error) {
	out, err := rc.recordOnce(StreamStepPrefix+stream, value, func(ctx context.Context, tx store.Tx, key store.StepKey, now int64) ([]byte, error) {
		first, err := tx.StreamAppend(ctx, store.StreamAppendParams{RunID: key.RunID, Stream: stream, Values: [][]byte{value}, At: now})
		if err != nil {
			return nil, err
		}
		ev := store.Event{Kind: flowtype.EventStreamWritten, Step: key.Name, Occurrence: key.Occurrence, Detail: positionsDetail(stream, first, 1)}
		return strconv.AppendInt(nil, first, 10), rc.st.x.event(ctx, tx, now, ev)
	})
	if err != nil {
		return 0, err
	}
	pos, err := strconv.ParseInt(string(out), 10, 64)
	if err != nil {
		return 0, rc.Abort(fmt.Errorf("run %s: recorded position of stream write %q is %q: %w", rc.RunID(), stream, out, err))
	}
	return pos, nil
}

// StreamClose closes stream from the workflow body, exactly once.
func (rc *RunContext) StreamClose(stream string) error {
	_, err := rc.recordOnce(StreamCloseStepPrefix+stream, []byte("{}"), func(ctx context.Context, tx store.Tx, key store.StepKey, now int64) ([]byte, error) {
		if err := tx.StreamClose(ctx, key.RunID, stream, now); err != nil {
			return nil, err
		}
		ev := store.Event{Kind: flowtype.EventStreamClosed, Step: key.Name, Occurrence: key.Occurrence, Detail: stream}
		return []byte("{}"), rc.st.x.event(ctx, tx, now, ev)
	})
	return err
}

// recordOnce records a call of the body named name, with input, as a step
// begun and completed in one transaction with what do writes, whose output
// do returns; a replay returns the recorded output and writes nothing.
func (rc *RunContext) recordOnce(name string, input []byte, do func(ctx context.Context, tx store.Tx, key store.StepKey, now int64) ([]byte, error)) ([]byte, error) {
	if err := CheckName("stream", name); err != nil {
		return nil, fmt.Errorf("run %s: %w", rc.RunID(), err)
	}
	key, rec, err := rc.lookup(name, nil)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		if rec.Status == store.StepFailed {
			return nil, &flowtype.StepError{RunID: key.RunID, Step: key.Name, Occurrence: key.Occurrence,
				Attempts: rec.Attempts, Err: recordedError(rec.Error, rec.Failure)}
		}
		return rec.Output, nil
	}
	if cause := rc.cause(); cause != nil {
		return nil, rc.Abort(cause)
	}
	x := rc.st.x
	var output []byte
	err = x.write(func(ctx context.Context, tx store.Tx, now int64) error {
		p := store.StepBeginParams{Key: key, Input: input, Position: rc.st.position(key), Now: now, New: true}
		if _, err := tx.StepBegin(ctx, p); err != nil {
			return err
		}
		var err error
		if output, err = do(ctx, tx, key, now); err != nil {
			return err
		}
		return tx.StepComplete(ctx, store.StepCompleteParams{Key: key, Output: output, Now: now})
	})
	if errors.Is(err, store.ErrStreamClosed) {
		// Not recorded: a replay finds the stream closed again, since the
		// close was recorded before.
		return nil, fmt.Errorf("run %s: %s: %w", key.RunID, name, err)
	}
	if err != nil {
		return nil, rc.Abort(err)
	}
	rc.st.addOutput(output)
	return output, nil
}

func positionsDetail(stream string, first int64, n int) string {
	return fmt.Sprintf("%s [%d, %d]", stream, first, first+int64(n)-1)
}

// streamBufferKey names the attempt a buffer holds the writes of.
type streamBufferKey struct {
	runID      string
	step       string
	occurrence int
	attempt    int
}

// stepStreams is an attempt's stream writes not committed yet, by
// stream in order of first write.
type stepStreams struct {
	order   []string
	pending map[string][][]byte
}

// streamBuffer holds an attempt's stream writes not committed yet. The
// step body's context carries it (streamBufferCtxKey), so a write finds
// it with one lookup and takes no lock but its own.
type streamBuffer struct {
	x   *execution
	key streamBufferKey

	flushMu sync.Mutex // one flush at a time, so batches commit in order

	mu sync.Mutex
	stepStreams
	timer *time.Timer
	err   error // the last flush's failure, for the next write to return
	ended bool  // the attempt's outcome took the buffer: no more writes
}

// streamBufferCtxKey is the context key of an attempt's streamBuffer.
type streamBufferCtxKey struct{}

// newStreamBuffer returns the empty buffer of an attempt of a step.
func (x *execution) newStreamBuffer(key store.StepKey, attempt int) *streamBuffer {
	return &streamBuffer{x: x, key: streamBufferKey{runID: key.RunID, step: key.Name, occurrence: key.Occurrence, attempt: attempt}}
}

// WriteStreamStep buffers value (JSON) for stream from a step body whose
// context is ctx.
func WriteStreamStep(ctx context.Context, stream string, value []byte) error {
	b, _ := ctx.Value(streamBufferCtxKey{}).(*streamBuffer)
	if b == nil {
		return fmt.Errorf("write stream %q: %w (only a step's Run may write streams)", stream, ErrNotInStep)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.err != nil:
		return b.err
	case b.ended:
		return fmt.Errorf("run %s: step %s: write stream %q: attempt %d has ended: %w", b.key.runID, b.key.step, stream, b.key.attempt, ErrNotInStep)
	}
	if _, seen := b.pending[stream]; !seen {
		if err := CheckName("stream", StreamStepPrefix+stream); err != nil {
			return fmt.Errorf("run %s: step %s: %w", b.key.runID, b.key.step, err)
		}
		if b.pending == nil {
			b.pending = make(map[string][][]byte)
		}
		b.order = append(b.order, stream)
	}
	b.pending[stream] = append(b.pending[stream], value)
	if b.timer == nil {
		b.timer = time.AfterFunc(StreamFlushInterval, func() { _ = b.flush() })
	}
	return nil
}

// take returns the buffer's pending writes and empties it, with the
// failure of an earlier flush; end marks the attempt ended. The caller
// holds flushMu.
func (b *streamBuffer) take(end bool) (stepStreams, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	taken := b.stepStreams
	b.stepStreams = stepStreams{}
	b.ended = b.ended || end
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	return taken, b.err
}

// flush commits the buffer's pending writes, each stream's in one append;
// end marks the attempt ended.
func (b *streamBuffer) flush() error { return b.flushAndEnd(false) }

func (b *streamBuffer) flushAndEnd(end bool) error {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	taken, prior := b.take(end)
	if prior != nil {
		return prior
	}
	if len(taken.order) == 0 {
		return nil
	}
	err := b.x.appendStepStreams(b.key, taken)
	if err != nil {
		err = fmt.Errorf("run %s: step %s: flush stream writes: %w", b.key.runID, b.key.step, err)
		b.mu.Lock()
		b.err = err
		b.mu.Unlock()
	}
	return err
}

// endFailed commits the pending writes of an attempt that failed, before
// its failure is recorded; the failure is the attempt's outcome whether
// or not they could be.
func (b *streamBuffer) endFailed() {
	if err := b.flushAndEnd(true); err != nil {
		b.x.e.log.Warn("stream writes of a failed attempt", "run", b.key.runID, "step", b.key.step, "attempt", b.key.attempt, "err", err)
	}
}

// endCompleted returns the pending writes of an attempt that completed,
// for its checkpoint to commit. It waits for a flush under way, so that
// batches commit in order. An earlier flush's failure, or a stream closed
// since the step wrote to it, is returned as the attempt's failure.
func (b *streamBuffer) endCompleted(ctx context.Context) (stepStreams, error) {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	taken, err := b.take(true)
	if err != nil || len(taken.order) == 0 {
		return stepStreams{}, err
	}
	streams, err := b.x.e.store.Reader().StreamList(ctx, b.key.runID)
	if err != nil {
		return stepStreams{}, fmt.Errorf("run %s: step %s: write streams: %w", b.key.runID, b.key.step, err)
	}
	for _, st := range streams {
		if _, wrote := taken.pending[st.Name]; wrote && st.ClosedAt != 0 {
			return stepStreams{}, fmt.Errorf("run %s: step %s: flush stream writes: append to stream %q of run %s: %w",
				b.key.runID, b.key.step, st.Name, b.key.runID, store.ErrStreamClosed)
		}
	}
	return taken, nil
}

// appendStepStreams appends an attempt's pending writes in one
// transaction fenced by the lease of the run's execution.
func (x *execution) appendStepStreams(key streamBufferKey, w stepStreams) error {
	ctx := context.WithoutCancel(x.leaseCtx)
	return x.writeRetryingBusy(ctx, func(tx store.Tx) error {
		if _, err := tx.RunLeaseCheck(ctx, x.lease); err != nil {
			return err
		}
		return x.writeStepStreams(ctx, tx, key, w, x.e.nowMs(), false)
	})
}

// writeStepStreams appends w in tx, each stream's messages in one append
// with one stream_written event. A stream closed since the attempt wrote
// to it fails the write, unless keepGoing: then (a checkpoint's write,
// which other writes share) its messages are not appended and the event
// says so.
func (x *execution) writeStepStreams(ctx context.Context, tx store.Tx, key streamBufferKey, w stepStreams, now int64, keepGoing bool) error {
	for _, stream := range w.order {
		values := w.pending[stream]
		first, err := tx.StreamAppend(ctx, store.StreamAppendParams{
			RunID: key.runID, Stream: stream, Values: values, At: now,
			Step: key.step, Occurrence: key.occurrence, Attempt: key.attempt,
		})
		detail := positionsDetail(stream, first, len(values))
		switch {
		case keepGoing && errors.Is(err, store.ErrStreamClosed):
			detail = fmt.Sprintf("%s closed: %d messages not appended", stream, len(values))
		case err != nil:
			return err
		}
		ev := store.Event{Kind: flowtype.EventStreamWritten, Step: key.step, Occurrence: key.occurrence, Attempt: key.attempt, Detail: detail}
		if err := x.event(ctx, tx, now, ev); err != nil {
			return err
		}
	}
	return nil
}

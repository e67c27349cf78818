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
// write and, by FlushStreams, when the body returns, before the attempt's
// outcome is recorded. Each flush commits on its own, fenced by the run's
// lease: an attempt that fails or is interrupted after a flush leaves the
// messages it flushed, and its retry appends its own after them. Step
// writes are thus at least once per attempt, and every message names the
// attempt that wrote it. Positions stay dense and ordered whatever
// happens: a reader that resumes by position sees each once.

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

// engineKey is the context key of the engine executing a run, in the
// contexts of its bodies.
type engineKey struct{}

// streamBufferKey names the attempt a buffer holds the writes of.
type streamBufferKey struct {
	runID      string
	step       string
	occurrence int
	attempt    int
}

// streamBuffers holds the buffers of the step attempts writing streams.
type streamBuffers struct {
	mu   sync.Mutex
	bufs map[streamBufferKey]*streamBuffer
}

// streamBuffer holds an attempt's writes not flushed yet, by stream in
// order of first write.
type streamBuffer struct {
	e   *Engine
	key streamBufferKey

	flushMu sync.Mutex // one flush at a time, so batches commit in order

	mu      sync.Mutex
	order   []string
	pending map[string][][]byte
	timer   *time.Timer
	err     error // the last flush's failure, for the next write to return
}

// WriteStreamStep buffers value (JSON) for stream from a step body whose
// context is ctx.
func WriteStreamStep(ctx context.Context, stream string, value []byte) error {
	e, _ := ctx.Value(engineKey{}).(*Engine)
	info, ok := AttemptFrom(ctx)
	if e == nil || !ok || info.Compensation || ctx.Value(txStepKey{}) != nil {
		return fmt.Errorf("write stream %q: %w (only a step's Run may write streams)", stream, ErrNotInStep)
	}
	if err := CheckName("stream", StreamStepPrefix+stream); err != nil {
		return fmt.Errorf("run %s: step %s: %w", info.RunID, info.Step, err)
	}
	key := streamBufferKey{runID: info.RunID, step: info.Step, occurrence: info.Occurrence, attempt: info.Attempt}
	e.streams.mu.Lock()
	if e.streams.bufs == nil {
		e.streams.bufs = make(map[streamBufferKey]*streamBuffer)
	}
	b := e.streams.bufs[key]
	if b == nil {
		b = &streamBuffer{e: e, key: key, pending: make(map[string][][]byte)}
		e.streams.bufs[key] = b
	}
	e.streams.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return b.err
	}
	if _, seen := b.pending[stream]; !seen {
		b.order = append(b.order, stream)
	}
	b.pending[stream] = append(b.pending[stream], value)
	if b.timer == nil {
		b.timer = time.AfterFunc(StreamFlushInterval, func() { _ = b.flush() })
	}
	return nil
}

// txStepKey marks the context of a RunTx step's body, whose transaction
// holds the writer: a flush from inside it would wait for itself.
type txStepKey struct{}

// WithTxStep returns ctx marked as a RunTx step's context.
func WithTxStep(ctx context.Context) context.Context {
	return context.WithValue(ctx, txStepKey{}, true)
}

// FlushStreams commits the stream writes of the attempt whose step body
// ctx is the context of, when it made any. The body's caller calls it
// once the body returned, so the messages commit before the attempt's
// outcome.
func FlushStreams(ctx context.Context) error {
	e, _ := ctx.Value(engineKey{}).(*Engine)
	if e == nil {
		return nil
	}
	info, ok := AttemptFrom(ctx)
	if !ok {
		return nil
	}
	key := streamBufferKey{runID: info.RunID, step: info.Step, occurrence: info.Occurrence, attempt: info.Attempt}
	e.streams.mu.Lock()
	b := e.streams.bufs[key]
	delete(e.streams.bufs, key)
	e.streams.mu.Unlock()
	if b == nil {
		return nil
	}
	return b.flush()
}

// flush commits the buffer's pending writes, each stream's in one append.
func (b *streamBuffer) flush() error {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	b.mu.Lock()
	order, pending := b.order, b.pending
	b.order, b.pending = nil, make(map[string][][]byte)
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	prior := b.err
	b.mu.Unlock()
	if prior != nil {
		return prior
	}
	if len(order) == 0 {
		return nil
	}
	err := b.e.appendStepStreams(b.key, order, pending)
	if err != nil {
		err = fmt.Errorf("run %s: step %s: flush stream writes: %w", b.key.runID, b.key.step, err)
		b.mu.Lock()
		b.err = err
		b.mu.Unlock()
	}
	return err
}

// appendStepStreams appends an attempt's pending writes in one
// transaction fenced by the lease of the run's execution here.
func (e *Engine) appendStepStreams(key streamBufferKey, order []string, pending map[string][][]byte) error {
	e.mu.Lock()
	x := e.active[key.runID]
	e.mu.Unlock()
	if x == nil {
		return fmt.Errorf("run %s is not executing here: %w", key.runID, store.ErrLeaseLost)
	}
	ctx := context.WithoutCancel(x.leaseCtx)
	return x.writeRetryingBusy(ctx, func(tx store.Tx) error {
		if _, err := tx.RunLeaseCheck(ctx, x.lease); err != nil {
			return err
		}
		now := e.nowMs()
		for _, stream := range order {
			values := pending[stream]
			first, err := tx.StreamAppend(ctx, store.StreamAppendParams{
				RunID: key.runID, Stream: stream, Values: values, At: now,
				Step: key.step, Occurrence: key.occurrence, Attempt: key.attempt,
			})
			if err != nil {
				return err
			}
			ev := store.Event{Kind: flowtype.EventStreamWritten, Step: key.step, Occurrence: key.occurrence, Attempt: key.attempt,
				Detail: positionsDetail(stream, first, len(values))}
			if err := x.event(ctx, tx, now, ev); err != nil {
				return err
			}
		}
		return nil
	})
}

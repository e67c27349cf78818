package flow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// tokenStep writes n tokens to the run's "tokens" stream from its body,
// and on its first attempt fails after writing them when failFirst is set.
func tokenStep(failFirst *atomic.Bool) flow.Step[int, int] {
	return flow.Step[int, int]{
		Name:  "generate",
		Retry: &flow.RetryPolicy{MaxAttempts: 3, InitialInterval: 1, MaxInterval: 1},
		Run: func(ctx context.Context, n int) (int, error) {
			for i := range n {
				if err := flow.WriteStreamCtx(ctx, "tokens", fmt.Sprintf("t%d", i)); err != nil {
					return 0, err
				}
			}
			if failFirst != nil && failFirst.CompareAndSwap(true, false) {
				return 0, errors.New("model hiccup")
			}
			return n, nil
		},
	}
}

// streamWorkflow writes "start" from the body, n tokens from a step, waits
// for a "go" signal (so the body is replayed), writes "end" and closes the
// stream, and then finds a write to the closed stream refused.
func streamWorkflow(failFirst *atomic.Bool) flow.Workflow[int, string] {
	return flow.Workflow[int, string]{
		Name: "stream_tokens",
		Run: func(wc flow.Context, n int) (string, error) {
			if _, err := flow.WriteStream(wc, "tokens", "start"); err != nil {
				return "", err
			}
			if _, err := flow.Do(wc, tokenStep(failFirst), n); err != nil {
				return "", err
			}
			if _, err := flow.Receive[string](wc, "go", 0); err != nil {
				return "", err
			}
			pos, err := flow.WriteStream(wc, "tokens", "end")
			if err != nil {
				return "", err
			}
			if err := flow.CloseStream(wc, "tokens"); err != nil {
				return "", err
			}
			if _, err := flow.WriteStream(wc, "tokens", "late"); !errors.Is(err, flow.ErrStreamClosed) {
				return "", fmt.Errorf("write after close: %v, want ErrStreamClosed", err)
			}
			return fmt.Sprint(pos), nil
		},
	}
}

// A reader following a stream from position 0 sees the body's and the
// step's writes once each, in order, with dense positions, until the
// stream closes; a replay of the body writes nothing again; the history
// has one stream_written event per batch; a reader resuming from a
// position gets the rest.
func TestStreamWrittenByBodyAndStepIsReadInOrder(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	wf := streamWorkflow(nil)
	flow.Register(e, wf)
	startEngine(t, e)

	run, err := flow.Start(ctx, e, wf, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	signalled := false
	for m, err := range flow.ReadStream[string](ctx, e, run.ID(), "tokens", 0) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Position != int64(len(got)) {
			t.Fatalf("message %q at position %d, want %d", m.Value, m.Position, len(got))
		}
		got = append(got, m.Value)
		if m.Value == "t4" && !signalled {
			signalled = true
			if _, err := flow.Signal(ctx, e, run.ID(), "go", "", nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := "start t0 t1 t2 t3 t4 end"
	if strings.Join(got, " ") != want {
		t.Fatalf("stream: %q, want %q", strings.Join(got, " "), want)
	}
	out, err := run.Result(ctx)
	if err != nil || out != "6" {
		t.Fatalf("result %q, %v; want 6", out, err)
	}
	rest, err := flow.StreamMessages[string](ctx, e, run.ID(), "tokens", 5)
	if err != nil || len(rest) != 2 || rest[0].Value != "t4" || rest[1].Value != "end" {
		t.Fatalf("messages from 5: %+v, %v", rest, err)
	}
	if rest[0].Step != "generate" || rest[0].Attempt != 1 || rest[1].Step != flow.StreamStepPrefix+"tokens" {
		t.Errorf("writers of the messages: %+v", rest)
	}
	streams, err := flow.Streams(ctx, e, run.ID())
	if err != nil || len(streams) != 1 || streams[0] != (flow.StreamInfo{Name: "tokens", Length: 7, Closed: true}) {
		t.Fatalf("streams: %+v, %v", streams, err)
	}
	events, err := e.History(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	var batches []string
	for _, ev := range events {
		if ev.Kind == flow.EventStreamWritten {
			batches = append(batches, ev.Detail)
		}
	}
	if strings.Join(batches, "; ") != "tokens [0, 0]; tokens [1, 5]; tokens [6, 6]" {
		t.Errorf("stream_written events: %q", batches)
	}
}

// A step attempt that fails after its writes were flushed leaves them, and
// its retry appends its own after them: positions stay dense and each
// message names its attempt.
func TestStreamWritesOfARetriedStepAreKeptPerAttempt(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var failFirst atomic.Bool
	failFirst.Store(true)
	wf := streamWorkflow(&failFirst)
	flow.Register(e, wf)
	startEngine(t, e)

	run, err := flow.Start(ctx, e, wf, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for m, err := range flow.ReadStream[string](ctx, e, run.ID(), "tokens", 0) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Position != int64(len(got)) {
			t.Fatalf("position %d, want %d", m.Position, len(got))
		}
		got = append(got, fmt.Sprintf("%s@%d", m.Value, m.Attempt))
		if len(got) == 5 {
			if _, err := flow.Signal(ctx, e, run.ID(), "go", "", nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := "start@0 t0@1 t1@1 t0@2 t1@2 end@0"
	if strings.Join(got, " ") != want {
		t.Fatalf("stream: %q, want %q", strings.Join(got, " "), want)
	}
}

// The stream of a finished run ends its readers even when it was never
// closed, and a step's write outside a step's Run is refused.
func TestStreamOfAFinishedRunEnds(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	wf := flow.Workflow[string, int]{
		Name: "stream_log",
		Run: func(wc flow.Context, line string) (int, error) {
			if err := flow.WriteStreamCtx(wc, "log", line); err == nil {
				return 0, errors.New("a step write from the body was accepted")
			}
			if _, err := flow.WriteStream(wc, "log", line); err != nil {
				return 0, err
			}
			return 1, nil
		},
	}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, "hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
	n := 0
	for m, err := range flow.ReadStream[string](ctx, e, run.ID(), "log", 0) {
		if err != nil || m.Value != "hello" {
			t.Fatalf("message %+v, %v", m, err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
	for _, err := range flow.ReadStream[int](ctx, e, run.ID(), "log", 0) {
		var de *flow.DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("read as int of a string: %v, want a *DecodeError", err)
		}
	}
}

// A step's writes still pending when its body returns commit with its
// checkpoint: its history has their stream_written event right before its
// step_completed. A write through the step's context once its attempt
// ended is refused, and a step writing to a stream the body closed fails.
func TestStreamWritesCommitWithTheStepsCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var stepCtx context.Context
	write := flow.Step[int, int]{Name: "write", Run: func(ctx context.Context, n int) (int, error) {
		stepCtx = ctx
		for i := range n {
			if err := flow.WriteStreamCtx(ctx, "log", i); err != nil {
				return 0, err
			}
		}
		return n, nil
	}}
	late := flow.Step[int, int]{Name: "late", Retry: &flow.RetryPolicy{MaxAttempts: 1}, Run: func(ctx context.Context, n int) (int, error) {
		return n, flow.WriteStreamCtx(ctx, "log", n)
	}}
	wf := flow.Workflow[int, string]{
		Name: "stream_checkpoint",
		Run: func(wc flow.Context, n int) (string, error) {
			if _, err := flow.Do(wc, write, n); err != nil {
				return "", err
			}
			if err := flow.CloseStream(wc, "log"); err != nil {
				return "", err
			}
			_, err := flow.Do(wc, late, 1)
			return fmt.Sprint(err), nil
		},
	}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	lateErr, err := run.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lateErr, "closed") {
		t.Errorf("a step writing to a closed stream: %q, want its attempt failed naming the closed stream", lateErr)
	}
	if err := flow.WriteStreamCtx(stepCtx, "log", 9); !errors.Is(err, flow.ErrNotInStep) {
		t.Errorf("write after the attempt ended: %v, want ErrNotInStep", err)
	}
	evs, err := e.History(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range evs {
		if ev.Step == "write" {
			kinds = append(kinds, ev.Kind+" "+ev.Detail)
		}
	}
	if got, want := strings.Join(kinds, "; "), "step_started ; stream_written log [0, 2]; step_completed "; got != want {
		t.Errorf("history of step write:\n got %q\nwant %q", got, want)
	}
	msgs, err := flow.StreamMessages[int](ctx, e, run.ID(), "log", 0)
	if err != nil || len(msgs) != 3 || msgs[2].Value != 2 {
		t.Errorf("messages: %+v, %v; want 0, 1, 2", msgs, err)
	}
}

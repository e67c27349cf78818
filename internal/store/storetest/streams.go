package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// streamTests are the conformance tests of store.StreamTx and
// store.StreamReader: dense positions in append order, closing, deletion
// with the run, and positions that concurrent appenders never share or
// commit out of order.
func streamTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"StreamAppendReadClose", testStreamAppendReadClose},
		{"StreamConcurrentAppendsDense", testStreamConcurrentAppends},
	}
}

// StreamAppend hands out dense positions per stream, StreamRead returns
// them from a position on, StreamClose refuses later appends, and deleting
// the run deletes its streams.
func testStreamAppendReadClose(t *testing.T, s store.Store) {
	insert(t, s, newRun("a"))
	appendTo := func(stream string, values ...string) int64 {
		var first int64
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			vs := make([][]byte, len(values))
			for i, v := range values {
				vs[i] = []byte(v)
			}
			var err error
			first, err = tx.StreamAppend(ctx, store.StreamAppendParams{RunID: "a", Stream: stream, Values: vs, At: base, Step: "gen", Occurrence: 1, Attempt: 2})
			return err
		})
		return first
	}
	if first := appendTo("tokens", `"a"`, `"b"`); first != 0 {
		t.Errorf("first append: first position %d, want 0", first)
	}
	if first := appendTo("logs", `1`); first != 0 {
		t.Errorf("first append to another stream: first position %d, want 0", first)
	}
	if first := appendTo("tokens", `"c"`); first != 2 {
		t.Errorf("second append: first position %d, want 2", first)
	}
	ctx := context.Background()
	msgs, err := s.Reader().StreamRead(ctx, "a", "tokens", 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Position != 1 || string(msgs[0].Value) != `"b"` || msgs[1].Position != 2 || string(msgs[1].Value) != `"c"` {
		t.Errorf("read from 1: %+v", msgs)
	}
	if m := msgs[0]; m.RunID != "a" || m.Stream != "tokens" || m.At != base || m.Step != "gen" || m.Occurrence != 1 || m.Attempt != 2 {
		t.Errorf("message fields: %+v", m)
	}
	if msgs, err := s.Reader().StreamRead(ctx, "a", "tokens", 0, 1); err != nil || len(msgs) != 1 || msgs[0].Position != 0 {
		t.Errorf("read with max 1: %+v, %v", msgs, err)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.StreamClose(ctx, "a", "tokens", base+5); err != nil {
			return err
		}
		if err := tx.StreamClose(ctx, "a", "tokens", base+9); err != nil { // again: keeps the first time
			return err
		}
		return tx.StreamClose(ctx, "a", "empty", base+6)
	})
	err = s.Write(ctx, func(tx store.Tx) error {
		_, err := tx.StreamAppend(ctx, store.StreamAppendParams{RunID: "a", Stream: "tokens", Values: [][]byte{[]byte(`"d"`)}, At: base})
		return err
	})
	if !errors.Is(err, store.ErrStreamClosed) {
		t.Errorf("append to a closed stream: %v, want ErrStreamClosed", err)
	}
	streams, err := s.Reader().StreamList(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Stream{
		{RunID: "a", Name: "empty", Length: 0, ClosedAt: base + 6},
		{RunID: "a", Name: "logs", Length: 1},
		{RunID: "a", Name: "tokens", Length: 3, ClosedAt: base + 5},
	}
	if fmt.Sprint(streams) != fmt.Sprint(want) {
		t.Errorf("streams:\n got %+v\nwant %+v", streams, want)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.RunSetStatus(ctx, store.RunSetStatusParams{ID: "a", Expected: flowtype.StatusPending, Status: flowtype.StatusCancelled, FinishedAt: base, Now: base}); err != nil {
			return err
		}
		_, err := tx.RunDeleteOne(ctx, "a")
		return err
	})
	if streams, err := s.Reader().StreamList(ctx, "a"); err != nil || len(streams) != 0 {
		t.Errorf("streams of a deleted run: %+v, %v", streams, err)
	}
	if msgs, err := s.Reader().StreamRead(ctx, "a", "tokens", 0, 10); err != nil || len(msgs) != 0 {
		t.Errorf("messages of a deleted run: %+v, %v", msgs, err)
	}
}

// Appends of many transactions at once to one stream get dense,
// distinct positions, and a reader following by position while they
// commit sees each position once, in order, with no gap.
func testStreamConcurrentAppends(t *testing.T, s store.Store) {
	insert(t, s, newRun("a"))
	const writers, batches, per = 4, 10, 3
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				err := s.Write(ctx, func(tx store.Tx) error {
					vs := make([][]byte, per)
					for i := range vs {
						vs[i] = fmt.Appendf(nil, `"%d.%d.%d"`, w, b, i)
					}
					_, err := tx.StreamAppend(ctx, store.StreamAppendParams{RunID: "a", Stream: "s", Values: vs, At: base})
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var next int64
	seen := map[string]bool{}
	const total = writers * batches * per
	for next < total {
		msgs, err := s.Reader().StreamRead(ctx, "a", "s", next, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.Position != next {
				t.Fatalf("read from %d got position %d: a gap or a reordering", next, m.Position)
			}
			if seen[string(m.Value)] {
				t.Fatalf("message %s at two positions", m.Value)
			}
			seen[string(m.Value)] = true
			next++
		}
		select {
		case err := <-errs:
			t.Fatal(err)
		case <-done:
			if len(msgs) == 0 && next < total {
				if msgs, _ := s.Reader().StreamRead(ctx, "a", "s", next, 1); len(msgs) == 0 {
					t.Fatalf("writers done, stream ends at %d of %d", next, total)
				}
			}
		default:
		}
	}
}

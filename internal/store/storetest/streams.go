package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
		{"StreamReadsAcrossAppends", testStreamReadsAcrossAppends},
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

// A read from any position, with any max, returns the positions of
// appends of every size exactly once and in order, each message as it was
// written and with its append's attempt; a message that is not JSON is
// refused and leaves the stream as it was.
func testStreamReadsAcrossAppends(t *testing.T, s store.Store) {
	insert(t, s, newRun("a"))
	ctx := context.Background()
	// 100 appends of 1 to 5 messages each: more than one page of chunks.
	var want []string
	for i := range 100 {
		n := 1 + i%5
		vs := make([][]byte, n)
		for j := range vs {
			v := fmt.Sprintf(`{"n": %d, "s": "x\u0041 %d"}`, len(want), j) // spaces and escapes kept as written
			vs[j] = []byte(v)
			want = append(want, v)
		}
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			_, err := tx.StreamAppend(ctx, store.StreamAppendParams{RunID: "a", Stream: "s", Values: vs, At: base + int64(i), Step: "gen", Occurrence: 1, Attempt: i})
			return err
		})
	}
	for _, from := range []int64{0, 1, 2, 7, 151, int64(len(want) - 1), int64(len(want)), int64(len(want) + 3)} {
		for _, max := range []int{1, 3, 40, 1000} {
			msgs, err := s.Reader().StreamRead(ctx, "a", "s", from, max)
			if err != nil {
				t.Fatalf("read from %d, max %d: %v", from, max, err)
			}
			wantN := min(int64(max), max64(0, int64(len(want))-from))
			if int64(len(msgs)) != wantN {
				t.Fatalf("read from %d, max %d: %d messages, want %d", from, max, len(msgs), wantN)
			}
			for i, m := range msgs {
				pos := from + int64(i)
				if m.Position != pos || string(m.Value) != want[pos] {
					t.Fatalf("read from %d, max %d: message %d is %d %s, want %d %s", from, max, i, m.Position, m.Value, pos, want[pos])
				}
			}
		}
	}
	// Position 4 is the third append's second message: attempt 2, at base+2.
	if msgs, err := s.Reader().StreamRead(ctx, "a", "s", 4, 1); err != nil || len(msgs) != 1 || msgs[0].Attempt != 2 || msgs[0].At != base+2 {
		t.Errorf("position 4: %+v, %v; want attempt 2 at base+2", msgs, err)
	}
	err := s.Write(ctx, func(tx store.Tx) error {
		_, err := tx.StreamAppend(ctx, store.StreamAppendParams{RunID: "a", Stream: "s", Values: [][]byte{[]byte(`1`), []byte(`{broken`)}, At: base})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("append of a broken message: %v, want an error naming it", err)
	}
	if streams, err := s.Reader().StreamList(ctx, "a"); err != nil || len(streams) != 1 || streams[0].Length != int64(len(want)) {
		t.Errorf("after the refused append: %+v, %v; want length %d", streams, err, len(want))
	}
}

func max64(a, b int64) int64 { return max(a, b) }

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

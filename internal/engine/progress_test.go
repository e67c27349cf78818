package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// An attempt is sampled every flush interval while young, then every
// twentieth of its age, never less often than the heartbeat.
func TestProgressGap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		age, heartbeat, want time.Duration
	}{
		{0, 10 * time.Second, progressFlushInterval},
		{3 * time.Second, 10 * time.Second, progressFlushInterval},
		{60 * time.Second, 10 * time.Second, 3 * time.Second},
		{time.Hour, 10 * time.Second, 10 * time.Second},
		{time.Hour, 100 * time.Millisecond, progressFlushInterval},
	} {
		if got := progressGap(c.age, c.heartbeat); got != c.want {
			t.Errorf("progressGap(%s, %s) = %s, want %s", c.age, c.heartbeat, got, c.want)
		}
	}
}

// A long message is cut at a character boundary.
func TestCutMessage(t *testing.T) {
	t.Parallel()
	m := strings.Repeat("é", MaxProgressMessage) // two bytes each
	got := cutMessage("a" + m)
	if len(got) > MaxProgressMessage || !utf8.ValidString(got) || len(got) < MaxProgressMessage-1 {
		t.Fatalf("cut to %d bytes (valid %v), want at most %d whole characters", len(got), utf8.ValidString(got), MaxProgressMessage)
	}
}

// take hands out the latest value of a changed slot once per gap, and a
// failed write makes it due again; end returns what is left unwritten.
func TestProgressBoardCoalesces(t *testing.T) {
	t.Parallel()
	e := &Engine{}
	x := &execution{e: e, run: store.Run{ID: "r"}}
	s := x.newProgress(store.StepKey{RunID: "r", Name: "export"}, 2)
	now := s.begun
	set := func(done int64) {
		t.Helper()
		if err := SetProgress(contextWith(s), flowtype.Progress{Done: done, Total: 10}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range int64(5) {
		set(i + 1)
	}
	got := e.progress.take(now, time.Second)
	if len(got) != 1 || got[0].ev.Detail != `{"done":5,"total":10}` || got[0].ev.Attempt != 2 {
		t.Fatalf("take = %+v, want one sample of the latest value", got)
	}
	set(6)
	if again := e.progress.take(now.Add(progressFlushInterval/2), time.Second); len(again) != 0 {
		t.Fatalf("take while a sample is written = %+v, want none", again)
	}
	settle(got, errTestWrite)
	if again := e.progress.take(now.Add(progressFlushInterval), time.Second); len(again) != 1 || again[0].ev.Detail != `{"done":6,"total":10}` {
		t.Fatalf("take after a failed write = %+v, want the latest value again", again)
	} else {
		settle(again, nil)
	}
	set(7)
	if ev := s.end(false); ev == nil || ev.Detail != `{"done":7,"total":10}` {
		t.Fatalf("end = %+v, want the unwritten last value", ev)
	}
	if err := SetProgress(contextWith(s), flowtype.Progress{Done: 8}); err == nil {
		t.Fatal("SetProgress after the attempt ended: no error")
	}
	if len(e.progress.slots) != 0 {
		t.Fatalf("%d slots left on the board after end", len(e.progress.slots))
	}
}

var errTestWrite = errors.New("write failed")

func contextWith(s *progressSlot) context.Context {
	return context.WithValue(context.Background(), progressKey{}, s)
}

// BenchmarkSetProgress is the cost of one SetProgress call in a step body,
// the part of BenchmarkStepProgress (package flow) that does not depend on
// the database: a thousand calls per attempt cost a thousand of these.
//
//	go test ./internal/engine -run '^$' -bench SetProgress
func BenchmarkSetProgress(b *testing.B) {
	e := &Engine{}
	x := &execution{e: e, run: store.Run{ID: "r"}}
	ctx := contextWith(x.newProgress(store.StepKey{RunID: "r", Name: "export"}, 1))
	p := flowtype.Progress{Total: int64(b.N), Message: "exported rows"}
	for i := range b.N {
		p.Done = int64(i)
		if err := SetProgress(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
}

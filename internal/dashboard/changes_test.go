package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/fixture"
)

// sseEvent is one server-sent event as read off the stream.
type sseEvent struct {
	id, event, data string
}

// openStream GETs /changes and returns a channel of its events, closed
// when the stream ends.
func openStream(t *testing.T, ctx context.Context, url string, header map[string]string) (<-chan sseEvent, *http.Response) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan sseEvent)
	go func() {
		defer close(events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" {
					select {
					case events <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return events, resp
}

func next(t *testing.T, events <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	panic("unreachable")
}

func TestChangesStream(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var all []flow.Change
	for c, err := range e.Changes(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, c)
	}

	events, resp := openStream(t, ctx, srv.URL+"/changes", nil)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	for i, want := range all {
		ev := next(t, events)
		var c flow.Change
		if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
			t.Fatal(err)
		}
		if ev.event != "change" || ev.id != strconv.FormatInt(want.Position, 10) || c.Position != want.Position || c.Kind != want.Kind || c.RunID != want.RunID {
			t.Fatalf("event %d: %+v, want change %d %s of %s", i, ev, want.Position, want.Kind, want.RunID)
		}
	}
	// A change committed now reaches the open stream.
	if _, err := flow.Signal(ctx, e, fixture.StuckRun, "nudge", 1, nil); err != nil {
		t.Fatal(err)
	}
	ev := next(t, events)
	var live flow.Change
	if err := json.Unmarshal([]byte(ev.data), &live); err != nil {
		t.Fatal(err)
	}
	if live.Kind != flow.EventSignalSent || live.RunID != fixture.StuckRun || live.Position <= all[len(all)-1].Position {
		t.Fatalf("live change: %+v", live)
	}

	// A reconnecting client resumes after Last-Event-ID.
	resumed, _ := openStream(t, ctx, srv.URL+"/changes", map[string]string{"Last-Event-ID": strconv.FormatInt(all[len(all)-1].Position, 10)})
	if ev := next(t, resumed); ev.id != strconv.FormatInt(live.Position, 10) {
		t.Fatalf("resumed stream starts at %s, want %d", ev.id, live.Position)
	}

	if r := do(t, http.MethodGet, srv.URL+"/changes?after=x", nil); r.status != http.StatusBadRequest {
		t.Errorf("bad position: status %d", r.status)
	}
}

func TestChangesStreamConsumerRefusedReadOnly(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, fixtureDB(t), &Options{ReadOnly: true})
	if r := do(t, http.MethodGet, srv.URL+"/changes?consumer=audit", nil); r.status != http.StatusForbidden {
		t.Fatalf("consumer on a read-only dashboard: status %d, want 403", r.status)
	}
}

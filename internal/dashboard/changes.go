package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// keepAlive is how often an idle stream sends a comment, so that proxies
// and browsers keep the connection open.
const keepAlive = 15 * time.Second

// changes streams the change feed as server-sent events (text/event-stream)
// until the client goes away: one "change" event per change, whose id is
// its position and whose data is the change as JSON. A client that
// reconnects sends the last id it got (Last-Event-ID, as EventSource does
// by itself) and resumes after it; ?after=N starts after position N.
// ?consumer=NAME reads as a durable consumer instead (flow.ChangesOptions):
// its position is acknowledged as changes are written to the stream, so
// it is refused in read-only mode. A reader behind retention gets one
// "error" event naming its position and the oldest complete one, and the
// stream ends.
func (d *Dashboard) changes(w http.ResponseWriter, r *http.Request) {
	opts := &flow.ChangesOptions{Follow: true, Consumer: r.URL.Query().Get("consumer")}
	if opts.Consumer != "" && d.readOnly {
		http.Error(w, "a durable consumer acknowledges positions, which a read-only dashboard does not write", http.StatusForbidden)
		return
	}
	for _, from := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")} {
		if from == "" {
			continue
		}
		n, err := strconv.ParseInt(from, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, fmt.Sprintf("bad position %q: want a non-negative integer", from), http.StatusBadRequest)
			return
		}
		opts.After = n
		break
	}
	rc := http.NewResponseController(w)
	// The server's WriteTimeout is for pages; a stream lasts as long as
	// its client.
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}

	type item struct {
		c   flow.Change
		err error
	}
	items := make(chan item)
	ctx := r.Context()
	go func() {
		defer close(items)
		for c, err := range d.e.Changes(ctx, opts) {
			select {
			case items <- item{c, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		var it item
		var ok bool
		select {
		case it, ok = <-items:
			if !ok {
				return
			}
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
			continue
		}
		if it.err != nil {
			if ctx.Err() == nil {
				d.writeStreamError(w, rc, it.err)
			}
			return
		}
		c := it.c
		c.At = c.At.UTC()
		data, err := json.Marshal(c) // flow.Change's JSON form
		if err != nil {
			d.log.Error("encode change", "position", it.c.Position, "err", err)
			return
		}
		if _, err := fmt.Fprintf(w, "id: %d\nevent: change\ndata: %s\n\n", it.c.Position, data); err != nil || rc.Flush() != nil {
			return
		}
	}
}

// writeStreamError ends a stream with an "error" event.
func (d *Dashboard) writeStreamError(w http.ResponseWriter, rc *http.ResponseController, err error) {
	body := map[string]any{"error": err.Error()}
	var behind *flow.FeedBehindError
	if errors.As(err, &behind) {
		body["consumer"] = behind.Consumer
		body["position"] = behind.Position
		body["oldest_complete"] = behind.OldestComplete()
	} else {
		d.log.Error("change stream", "err", err)
	}
	data, _ := json.Marshal(body)
	_, _ = fmt.Fprintf(w, "event: error\ndata: %s\n\n", data)
	_ = rc.Flush()
}

package dashboard

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// The overview and /metrics name the queues whose pending runs no live
// engine works: the fixture's pending run waits in queue "batch", which no
// engine works, until one that does starts.
func TestUnworkedQueues(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	srv, _ := server(t, path, nil)

	body := do(t, http.MethodGet, srv.URL+"/metrics", nil).body
	if got := sample(t, body, `flowlite_queue_unworked_pending{queue="batch"}`); got != 1 {
		t.Errorf("flowlite_queue_unworked_pending{queue=batch} = %v, want 1", got)
	}
	if got := sample(t, body, `flowlite_queue_unworked_oldest_age_seconds{queue="batch"}`); got <= 0 || got > 600 {
		t.Errorf("flowlite_queue_unworked_oldest_age_seconds{queue=batch} = %v, want the fixture's age", got)
	}
	if strings.Contains(body, `flowlite_queue_unworked_pending{queue="default"}`) {
		t.Errorf("metrics name the default queue, which has no pending run:\n%s", body)
	}
	page := do(t, http.MethodGet, srv.URL+"/", nil).body
	if !strings.Contains(page, `id="unworked"`) || !strings.Contains(page, `data-unworked="batch"`) {
		t.Errorf("overview lacks the unworked queue batch:\n%s", page)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e, err := flowsqlite.Open(ctx, path, &flow.Config{Queues: map[string]flow.QueueConfig{"batch": {}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Start(ctx); err != nil { // lacks the run's workflow: the run stays pending
		t.Fatal(err)
	}
	body = do(t, http.MethodGet, srv.URL+"/metrics", nil).body
	if strings.Contains(body, `flowlite_queue_unworked_pending{`) {
		t.Errorf("metrics name an unworked queue while an engine works batch:\n%s", body)
	}
	if page := do(t, http.MethodGet, srv.URL+"/", nil).body; strings.Contains(page, `id="unworked"`) {
		t.Errorf("overview names unworked queues while batch is worked")
	}
}

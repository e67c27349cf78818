package dashboard

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// The run page lists the values a run published, latest per key.
func TestRunPagePublished(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)
	wf := flow.Workflow[int, int]{Name: "announcer", Run: func(wc flow.Context, n int) (int, error) {
		if err := flow.Publish(wc, "phase", "loading"); err != nil {
			return 0, err
		}
		return n, flow.Publish(wc, "phase", "loaded")
	}}
	flow.Register(e, wf)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(ctx)
	r, err := flow.Start(ctx, e, wf, 1, &flow.StartOptions{RunID: "pub-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Result(ctx); err != nil {
		t.Fatal(err)
	}
	body := do(t, http.MethodGet, srv.URL+"/runs/pub-1", nil).body
	want := `<details open id="run-published"><summary>Published</summary><dl class="facts"><dt><code>phase</code></dt><dd><pre>&#34;loaded&#34;</pre></dd></dl></details>`
	if !strings.Contains(body, want) {
		t.Errorf("run page lacks %s", want)
	}
}

// The run page lists a run's streams with their lengths and the tail of
// their messages, by position.
func TestRunPageStreams(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)
	wf := flow.Workflow[int, int]{Name: "streamer", Run: func(wc flow.Context, n int) (int, error) {
		for i := range n {
			if _, err := flow.WriteStream(wc, "log", i); err != nil {
				return 0, err
			}
		}
		return n, flow.CloseStream(wc, "log")
	}}
	flow.Register(e, wf)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(ctx)
	r, err := flow.Start(ctx, e, wf, 12, &flow.StartOptions{RunID: "stream-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Result(ctx); err != nil {
		t.Fatal(err)
	}
	body := do(t, http.MethodGet, srv.URL+"/runs/stream-1", nil).body
	want := `<details open id="run-streams"><summary>Streams</summary><h3><code>log</code> 12 messages, closed</h3><ol class="stream-tail"><li value="2"><code>2</code></li>`
	if !strings.Contains(body, want) {
		t.Errorf("run page lacks %s", want)
	}
	if strings.Contains(body, `<li value="1">`) || !strings.Contains(body, `<li value="11"><code>11</code></li></ol>`) {
		t.Errorf("run page's tail is not the last %d messages", 10)
	}
}

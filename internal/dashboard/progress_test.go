package dashboard

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// The run page shows a progress bar, the percentage and the message of
// each step that reported progress.
func TestRunPageProgress(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)
	job := flow.Job[int]{Name: "progress_page", Handler: func(ctx context.Context, n int) error {
		return flow.SetProgress(ctx, flow.Progress{Done: 40, Total: 100, Message: "exported <40k> rows"})
	}}
	flow.RegisterJob(e, job)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(ctx)
	r, err := flow.Enqueue(ctx, e, job, 1, &flow.EnqueueOptions{RunID: "prog-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Result(ctx); err != nil {
		t.Fatal(err)
	}
	body := do(t, http.MethodGet, srv.URL+"/runs/prog-1", nil).body
	want := `<details open id="run-progress"><summary>Progress</summary><dl class="facts"><dt><code>progress_page#0</code></dt>` +
		`<dd><progress max="100" value="40">40%</progress> 40% (40/100) <span class="progress-message">exported &lt;40k&gt; rows</span></dd></dl></details>`
	if !strings.Contains(body, want) {
		t.Errorf("run page lacks %s", want)
	}
	if body := do(t, http.MethodGet, srv.URL+"/runs/saga-1", nil).body; strings.Contains(body, `id="run-progress"`) {
		t.Error("a run without progress shows a progress section")
	}
}

package metrics_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/metrics"
)

// TestLimitFamilies: a queue with limits gets the limit gauges, with the
// limit and its use; without limits there are none.
func TestLimitFamilies(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e, err := flowsqlite.Open(ctx, filepath.Join(t.TempDir(), "m.db"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	scrape := func() string {
		var b bytes.Buffer
		w := metrics.NewWriter(&b)
		metrics.Write(ctx, e, w, nil)
		return b.String()
	}
	if out := scrape(); strings.Contains(out, "flowlite_queue_limit_") {
		t.Errorf("limit families without limits:\n%s", out)
	}
	if err := e.SetQueueLimits(ctx, "mail", flow.QueueLimits{Concurrency: 5, Rate: flow.RateLimit{Limit: 100, Period: 2 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	out := scrape()
	for _, want := range []string{
		"# TYPE flowlite_queue_limit_concurrency gauge\n",
		`flowlite_queue_limit_concurrency{queue="mail"} 5` + "\n",
		`flowlite_queue_limit_rate{queue="mail"} 100` + "\n",
		`flowlite_queue_limit_rate_period_seconds{queue="mail"} 2` + "\n",
		`flowlite_queue_limit_running{queue="mail"} 0` + "\n",
		`flowlite_queue_limit_started{queue="mail"} 0` + "\n",
		`flowlite_queue_limit_held_back{queue="mail"} 0` + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

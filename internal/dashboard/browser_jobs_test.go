package dashboard

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowlite/flowlite/flow"
)

// browserJobSteps retries a dead letter from the dead letters page, through
// its confirmation page, and checks the database changed.
func browserJobSteps(t *testing.T, bctx context.Context, base string, e *flow.Engine, shot func(string)) {
	t.Helper()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("open dead letters", chromedp.Do(bctx,
		chromedp.Navigate(base+"/dead"),
		chromedp.WaitVisible(chromedp.CSS(`#dead tr[data-run="`+sagaRun+`"]`)),
	))
	shot("dead")
	must("retry", chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#dead tr[data-run="`+sagaRun+`"] a[href$="/retry"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm")),
		chromedp.Click(chromedp.ID("confirm")),
		chromedp.WaitVisible(chromedp.CSS(".flash")),
	))
	shot("retried")
	id, err := chromedp.Run(bctx, chromedp.Text(chromedp.ID("run-id")))
	must("new run ID", err)
	if id != sagaRun+"/requeue-1" {
		t.Errorf("after retry the page shows run %q, want %s/requeue-1", id, sagaRun)
	}
	info, err := e.Inspect(bctx, sagaRun)
	must("inspect", err)
	if info.RequeuedAs != sagaRun+"/requeue-1" {
		t.Errorf("after retry the dead letter is requeued as %q", info.RequeuedAs)
	}
	again, err := e.Inspect(bctx, info.RequeuedAs)
	must("inspect the new run", err)
	if again.Status != flow.StatusPending || again.RequeuedFrom != sagaRun {
		t.Errorf("new run: %s, requeued from %q", again.Status, again.RequeuedFrom)
	}
	// The dead letter is gone from the list.
	must("reload dead letters", chromedp.Do(bctx,
		chromedp.Navigate(base+"/dead"),
		chromedp.WaitVisible(chromedp.CSS(".empty")),
	))
	text, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(".empty")))
	must("text", err)
	if !strings.Contains(text, "No dead letters") {
		t.Errorf("dead letters page after retry: %q", text)
	}
	must("overview", chromedp.Do(bctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("queues")),
	))
	shot("overview-after")
}

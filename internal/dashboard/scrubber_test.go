package dashboard

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// The run page's scrubber shows the run as it stood after an event of its
// history: the saga fixture, right after reserve completed, is running with
// reserve completed and nothing compensated, offers no actions, and dims
// the later events; at its last event it is the page of the run now.
func TestRunPageScrubber(t *testing.T) {
	t.Parallel()
	srv, e := server(t, fixtureDB(t), nil)
	events, err := e.History(context.Background(), stuckRun)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, ev := range events {
		if ev.Kind == "step_completed" && ev.Step == "reserve" {
			n = i + 1
		}
	}
	if n == 0 {
		t.Fatal("no step_completed of reserve in the fixture's stuck run")
	}
	past := do(t, "GET", fmt.Sprintf("%s/runs/%s?at=%d", srv.URL, stuckRun, n), nil)
	if past.status != 200 {
		t.Fatalf("GET ?at=%d: %d\n%s", n, past.status, past.body)
	}
	for _, want := range []string{
		`id="run-status">running<`, `id="past-note"`, fmt.Sprintf(`value="%d"`, n), `id="scrub-now"`,
		fmt.Sprintf(`href="/runs/%s?at=%d"`, stuckRun, n+1),
	} {
		if !strings.Contains(past.body, want) {
			t.Errorf("the page after event %d lacks %s", n, want)
		}
	}
	for _, unwanted := range []string{`id="action-`, `comp-failed">failed`, "Reason</dt>"} {
		if strings.Contains(past.body, unwanted) {
			t.Errorf("the page after event %d has %s: it shows the present", n, unwanted)
		}
	}
	if got, want := len(regexp.MustCompile(`<tr class="ev-[a-z_]+ future">`).FindAllString(past.body, -1)), len(events)-n; got != want {
		t.Errorf("%d history rows dimmed, want the %d after event %d", got, want, n)
	}

	now := do(t, "GET", fmt.Sprintf("%s/runs/%s?at=%d", srv.URL, stuckRun, len(events)), nil)
	if now.status != 200 || !strings.Contains(now.body, `id="run-status">suspended<`) || strings.Contains(now.body, `id="past-note"`) ||
		!strings.Contains(now.body, `id="action-resume"`) {
		t.Errorf("the page at the last event is not the run now: %d", now.status)
	}
	for _, bad := range []string{"0", "x", fmt.Sprint(len(events) + 1)} {
		r := do(t, "GET", fmt.Sprintf("%s/runs/%s?at=%s", srv.URL, stuckRun, bad), nil)
		if r.status != 400 || !strings.Contains(r.body, "Invalid position") {
			t.Errorf("GET ?at=%s: %d, want 400 naming the position", bad, r.status)
		}
	}
}

package dashboard

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// runIDs returns the IDs of the runs a runs page lists, in order.
func runIDs(page string) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`data-run="([^"]+)"`).FindAllStringSubmatch(page, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// The runs list searches by ID prefix, error or reason text and an input
// field, on the server (issue 22).
func TestRunsSearch(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, fixtureDB(t), nil)
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"id=sag", []string{"saga-1"}},
		{"id=1", nil},                                     // a prefix, not a substring
		{"error=DECLINED", []string{"stuck-1", "saga-1"}}, // newest first
		{"error=unreachable", []string{"stuck-1"}},
		{"input=item%3Dlamp", []string{"saga-1"}},
		{"input=item+%3D+sofa", []string{"stuck-1"}},
		{"input=item%3Dlam", nil},
		{"input=item%3Dlamp&status=completed", nil},
		{"input=item%3Dbook&workflow=ship_order&id=done", []string{"done-1"}},
		{"input=item%3Dbook&workflow=pay_order", nil},
	} {
		r := do(t, http.MethodGet, srv.URL+"/runs?"+tt.query, nil)
		if r.status != http.StatusOK {
			t.Errorf("/runs?%s: status %d", tt.query, r.status)
			continue
		}
		if got := runIDs(r.body); !slices.Equal(got, tt.want) {
			t.Errorf("/runs?%s: runs %v, want %v", tt.query, got, tt.want)
		}
	}
	if r := do(t, http.MethodGet, srv.URL+"/runs?id=sag&error=declined&input=item%3Dlamp", nil); !contains(r.body,
		`id="f-id" value="sag"`, `id="f-error" value="declined"`, `id="f-input" value="item=lamp"`) {
		t.Errorf("the search form does not keep the search:\n%s", r.body)
	}
	for _, bad := range []string{"input=item", "input=%3Dlamp", "input=it%22em%3Dx"} {
		if r := do(t, http.MethodGet, srv.URL+"/runs?"+bad, nil); r.status != http.StatusBadRequest || !contains(r.body, "field=value") {
			t.Errorf("/runs?%s: status %d, want 400 naming field=value", bad, r.status)
		}
	}
}

// The page of a run that is not finished reloads itself; a finished or
// suspended run's do not (issue 22).
func TestRunPageRefreshesWhileUnfinished(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, fixtureDB(t), nil)
	const meta = `<meta http-equiv="refresh" content="5" id="auto-refresh">`
	if r := do(t, http.MethodGet, srv.URL+"/runs/pending-1", nil); !contains(r.body, meta) {
		t.Errorf("the pending run's page does not refresh:\n%s", r.body)
	}
	for _, path := range []string{"/runs/done-1", "/runs/stuck-1", "/runs/saga-1", "/runs"} {
		if r := do(t, http.MethodGet, srv.URL+path, nil); contains(r.body, "auto-refresh") {
			t.Errorf("%s refreshes", path)
		}
	}
}

// Short cells of the runs list do not wrap, the error column takes the
// rest of the width (issue 22).
func TestRunsListLayout(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, fixtureDB(t), nil)
	r := do(t, http.MethodGet, srv.URL+"/runs", nil)
	if !contains(r.body, `<td class="short" title=`, `<th class="wide">Error / reason</th>`) {
		t.Errorf("runs list lacks its column classes:\n%s", r.body)
	}
	css := do(t, http.MethodGet, srv.URL+"/static/style.css", nil).body
	if !contains(css, "table.grid td.short { white-space: nowrap;") {
		t.Errorf("style.css lacks the nowrap rule of short cells")
	}
}

// Branch calls are named by their step and place in the fan-out; the
// recorded name stays for top-level calls (reset and fork take it).
func TestStepLabels(t *testing.T) {
	t.Parallel()
	steps := []flow.StepRecord{
		{Name: "open"}, {Name: "all0.0/price"}, {Name: "all0.4/price"}, {Name: "all0.2/price", Occurrence: 1},
		{Name: "all1.0/all0.1/tax"}, {Name: "first0.1/quote"},
		{Name: "scope0/all0.1/flow.sleep"}, {Name: "scope0/flow.cancel"},
	}
	l := newStepLabels(steps)
	for _, tt := range []struct {
		name string
		occ  int
		want string
	}{
		{"open", 0, "open#0"},
		{"open", 2, "open#2"},
		{"all0.0/price", 0, "price (1 of 5)"},
		{"all0.4/price", 0, "price (5 of 5)"},
		{"all0.2/price", 1, "price #2 (3 of 5)"},
		{"all1.0/all0.1/tax", 0, "tax (1 of 1, 2 of 2)"},
		{"first0.1/quote", 0, "quote (2 of 2)"},
		{"all7.3/late", 0, "late (4 of 4)"}, // a call not among the steps: its index bounds it
		{"scope0/all0.1/flow.sleep", 0, "flow.sleep (scope 1, 2 of 2)"},
		{"scope0/flow.cancel", 0, "flow.cancel (scope 1)"},
	} {
		if got := l.Of(tt.name, tt.occ); got != tt.want {
			t.Errorf("label of %s#%d = %q, want %q", tt.name, tt.occ, got, tt.want)
		}
	}
}

// contains reports whether s holds every one of subs.
func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

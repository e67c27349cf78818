package dashboard

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/internal/pgtest"
)

// TestStandbyText: the banner calls the replay age a lag only while the
// standby replays; caught up, it says so and how old the last commit is.
func TestStandbyText(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		st   flow.StandbyStatus
		want string
	}{
		{flow.StandbyStatus{}, ""},
		{flow.StandbyStatus{Standby: true, ReplayAge: 12400 * time.Millisecond}, "Reading from a standby, 12 s behind the primary (replaying): what this page shows may be that old."},
		{flow.StandbyStatus{Standby: true, ReplayAge: 2340 * time.Millisecond}, "Reading from a standby, 2.3 s behind the primary (replaying): what this page shows may be that old."},
		{flow.StandbyStatus{Standby: true, CaughtUp: true, ReplayAge: 42 * time.Second}, "Reading from a standby, caught up with the primary (last replayed commit 42 s ago)."},
	} {
		if got := standbyText(tt.st); got != tt.want {
			t.Errorf("standbyText(%+v) = %q, want %q", tt.st, got, tt.want)
		}
	}
}

// TestPagesOnAStandby: a dashboard on an engine opened on a streaming
// standby (FLOWLITE_PG_STANDBY_DSN, as .ci/run makes one) shows the runs
// the primary recorded under a banner saying it reads from a standby and
// how far behind; the same pages off the primary, and off SQLite
// (TestPages), carry no banner.
func TestPagesOnAStandby(t *testing.T) {
	if pgtest.Pooler() != "" {
		t.Skip("the standby is reached directly")
	}
	standbyDSN, err := pgtest.StandbyDSN()
	if err != nil {
		t.Fatal(err)
	}
	if standbyDSN == "" {
		t.Skipf("needs %s: a streaming standby of the test server", pgtest.StandbyDSNEnv)
	}
	dsn, schema := pgtest.Schema(t)
	ctx := t.Context()
	primary, err := flowpg.Open(ctx, dsn, nil, &flowpg.Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close()
	wf := flow.Workflow[int, int]{Name: "standby_page", Version: 1, Run: func(flow.Context, int) (int, error) { return 0, nil }}
	flow.Register(primary, wf)
	if _, err := flow.Start(ctx, primary, wf, 1, &flow.StartOptions{RunID: "on-the-primary"}); err != nil {
		t.Fatal(err)
	}
	if err := pgtest.AwaitStandby(ctx, standbyDSN, schema, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	replica, err := flowpg.Open(ctx, standbyDSN, nil, &flowpg.Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatalf("open on the standby: %v", err)
	}
	defer replica.Close()
	serve := func(e *flow.Engine) *httptest.Server {
		d, err := New(e, &Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(d)
		t.Cleanup(srv.Close)
		return srv
	}
	onStandby, onPrimary := serve(replica), serve(primary)

	deadline := time.Now().Add(30 * time.Second)
	for {
		r := do(t, "GET", onStandby.URL+"/runs", nil)
		if r.status == 200 && strings.Contains(r.body, `data-run="on-the-primary"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the primary's run not on the standby's /runs after 30s: %d\n%s", r.status, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, path := range []string{"/", "/runs", "/runs/on-the-primary", "/suspended", "/dead"} {
		r := do(t, "GET", onStandby.URL+path, nil)
		banner := between(r.body, `<p class="standby" id="standby" role="status">`, "</p>")
		if r.status != 200 || !strings.HasPrefix(banner, "Reading from a standby, ") ||
			!(strings.Contains(banner, "s behind the primary (replaying)") || strings.Contains(banner, "caught up with the primary (last replayed commit ")) {
			t.Errorf("GET %s on the standby: %d, banner %q, want one saying it reads from a standby and how far behind", path, r.status, banner)
		}
		if path == "/" {
			t.Logf("the standby's banner: %s", banner)
		}
		if r := do(t, "GET", onPrimary.URL+path, nil); r.status != 200 || strings.Contains(r.body, `id="standby"`) {
			t.Errorf("GET %s on the primary: %d, with a standby banner: %v", path, r.status, strings.Contains(r.body, `id="standby"`))
		}
	}
}

// between returns the text of s between the first start and the end that
// follows it, "" when start is not in s.
func between(s, start, end string) string {
	_, after, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	in, _, _ := strings.Cut(after, end)
	return in
}

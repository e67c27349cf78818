package dashboard

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/fixture"
)

// Run IDs of the fixture database (internal/fixture).
const (
	doneRun    = fixture.DoneRun
	sagaRun    = fixture.SagaRun
	stuckRun   = fixture.StuckRun
	pendingRun = fixture.PendingRun
)

// fixtureDB builds the database internal/fixture describes and returns its
// path.
func fixtureDB(t testing.TB) string { return fixture.Build(t) }

// server opens the fixture database with an engine that is never started
// and serves its dashboard.
func server(t testing.TB, path string, opts *Options) (*httptest.Server, *flow.Engine) {
	t.Helper()
	e, err := flowsqlite.Open(context.Background(), path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(e, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	t.Cleanup(func() {
		srv.Close()
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return srv, e
}

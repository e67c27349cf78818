package flowui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/flow/flowui"
)

// The dashboard and its API work on a sharded engine: they list the runs
// of every shard, show and act on a run of shard 1, and report healthy.
func TestShardedEngine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	e, err := flowsqlite.OpenShards(ctx, []string{filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	wf := flow.Workflow[int, int]{Name: "later", Run: func(_ flow.Context, n int) (int, error) { return n, nil }}
	flow.Register(e, wf)
	ids := make([]string, 2) // a pending run in each shard
	for n := 0; ids[0] == "" || ids[1] == ""; n++ {
		if id := fmt.Sprintf("run-%d", n); ids[e.PlaceRun(id, "")] == "" {
			ids[e.PlaceRun(id, "")] = id
			if _, err := flow.Start(ctx, e, wf, n, &flow.StartOptions{RunID: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ui, err := flowui.New(e, &flowui.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", ui)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	a := newAPIClient(t, srv.URL)
	var list struct{ Runs []flow.RunInfo }
	if code := a.call("GET", "/runs", "", &list); code != 200 || len(list.Runs) != 2 {
		t.Fatalf("runs: %d, %+v; want the runs of both shards", code, list.Runs)
	}
	var run flow.RunInfo
	if code := a.call("GET", "/runs/"+ids[1], "", &run); code != 200 || run.ID != ids[1] {
		t.Fatalf("run of shard 1: %d %+v", code, run)
	}
	var act struct{ Action, Run string }
	if code := a.call("POST", "/runs/"+ids[1]+"/cancel", "", &act); code != 200 || act.Run != ids[1] {
		t.Fatalf("cancel the run of shard 1: %d %+v", code, act)
	}
	if info, err := e.Shard(1).Inspect(ctx, ids[1]); err != nil || info.Status != flow.StatusCancelled {
		t.Fatalf("after cancel: %+v, %v", info, err)
	}

	c := client(t)
	code, body := get(t, c, srv.URL+prefix+"/runs")
	if code != 200 || !strings.Contains(body, ids[0]) || !strings.Contains(body, ids[1]) {
		t.Errorf("runs page: %d, want both %v", code, ids)
	}
	if code, body := get(t, c, srv.URL+prefix+"/"); code != 200 || !strings.Contains(body, "a.db,") {
		t.Errorf("overview: %d, want the files of the set", code)
	}
	if code, body := get(t, c, srv.URL+prefix+"/healthz"); code != 200 {
		t.Errorf("healthz: %d %s", code, body)
	}
	if code, body := get(t, c, srv.URL+prefix+"/metrics"); code != 200 || !strings.Contains(body, "flowlite_database_bytes") {
		t.Errorf("metrics: %d, no database size", code)
	}
}

package dashboard

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

const dagDefinition = `
name: dash_dag
version: 1
inputs:
  fail: {type: bool}
steps:
  - id: extract
    uses: work
    input: '"x"'
  - id: transform
    uses: work
    needs: extract
    forEach: '["a", "b"]'
    input: item
  - id: approval
    needs: transform
    receive: {signal: go}
  - id: publish
    uses: work
    needs: approval
    input: 'input.fail ? "fail" : "ok"'
`

// TestRunDAG: the page of a run of a stored definition draws its DAG with
// each node's state; a Go workflow's page has none.
func TestRunDAG(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "dag.db")
	eng, err := flowsqlite.Open(ctx, path, &flow.Config{PollInterval: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat := flowdef.NewCatalog()
	if err := flowdef.AddStep(cat, flow.Step[string, string]{
		Name: "work",
		Run: func(ctx context.Context, in string) (string, error) {
			if in == "fail" {
				return "", flow.Permanent(errors.New("refused"))
			}
			return in, nil
		},
		Compensate: func(context.Context, string, string) error { return nil },
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := flowdef.Apply(ctx, eng, "dag.yaml", []byte(dagDefinition), cat); err != nil {
		t.Fatal(err)
	}
	lib, err := flowdef.LoadLibrary(ctx, eng, cat)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	failed, err := lib.Start(ctx, eng, "dash_dag", flowdef.Values{"fail": true}, &flow.StartOptions{RunID: "dag-failed"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lib.Start(ctx, eng, "dash_dag", flowdef.Values{"fail": false}, &flow.StartOptions{RunID: "dag-waiting"}); err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Signal(ctx, eng, failed.ID(), "go", true, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := failed.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("failed run: %v", err)
	}
	for {
		info, err := eng.Inspect(ctx, "dag-waiting")
		if err != nil {
			t.Fatal(err)
		}
		if info.Status == flow.StatusWaiting {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	srv, _ := server(t, path, nil)
	for id, want := range map[string][]string{
		"dag-failed": {`id="dag"`, `data-id="extract" data-state="compensated"`, `data-id="transform" data-state="compensated"`,
			`data-id="approval" data-state="completed"`, `data-id="publish" data-state="failed"`},
		"dag-waiting": {`id="dag"`, `data-id="transform" data-state="completed"`, `data-id="approval" data-state="waiting"`,
			`data-id="publish" data-state=""`},
	} {
		r := do(t, http.MethodGet, srv.URL+"/runs/"+id, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET /runs/%s: %d", id, r.status)
		}
		for _, w := range want {
			if !strings.Contains(r.body, w) {
				t.Errorf("GET /runs/%s lacks %q", id, w)
			}
		}
	}
	// A Go workflow's run has no DAG.
	fixture, _ := server(t, fixtureDB(t), nil)
	if r := do(t, http.MethodGet, fixture.URL+"/runs/saga-1", nil); strings.Contains(r.body, `id="dag"`) {
		t.Errorf("a Go workflow's run shows a DAG")
	}
}

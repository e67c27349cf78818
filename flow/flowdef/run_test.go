package flowdef_test

import (
	"os"
	"slices"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
	"github.com/flowlite/flowlite/flow/flowtest"
)

func loadFile(t *testing.T, path string, cat *flowdef.Catalog) *flowdef.Workflow {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := flowdef.Load(path, src, cat)
	if err != nil {
		t.Fatalf("load %s:\n%v", path, err)
	}
	return w
}

func TestPipelineRunsTheDAG(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	w := loadFile(t, "testdata/valid/pipeline.yaml", testCatalog(t, rec))
	env := flowtest.New(t, nil)
	run := flowtest.Start(env, w.Flow(), flowdef.Values{"source": "s3://x"}, nil)
	if _, err := flow.Signal(t.Context(), env.Engine, run.ID(), "approve", map[string]any{"ok": true}, nil); err != nil {
		t.Fatal(err)
	}
	out, err := flowtest.Await(env, run)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	// batches [1 2] [3 4] [5], ×10: 30 + 70 + 50
	if out["total"] != float64(150) || out["url"] != "https://example.test/events-1" || out["published"] != true {
		t.Fatalf("outputs = %v", out)
	}
	ran := rec.ranSteps()
	if ran[0] != "extract" || !slices.Contains(ran, "transform[5]") || ran[len(ran)-1] != "publish" {
		t.Fatalf("ran %v", ran)
	}
}

package defgen_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow/flowdef"
	"github.com/flowlite/flowlite/internal/defgen"
)

func TestExported(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"load": "Load", "order_id": "OrderID", "batchSize": "BatchSize", "send-url": "SendURL", "2fa": "X2fa", "place order": "PlaceOrder",
	} {
		if got := defgen.Exported(in); got != want {
			t.Errorf("Exported(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestExampleIsUpToDate: the example's generated files are what the
// generator writes today (go generate ./examples/pipeline after a change).
func TestExampleIsUpToDate(t *testing.T) {
	t.Parallel()
	dir := "../../examples/pipeline"
	src, err := os.ReadFile(filepath.Join(dir, "pipeline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := flowdef.Validate("pipeline.yaml", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	files, err := defgen.Generate(d, defgen.Options{Package: "main", File: "pipeline.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{"pipeline_flowdef.go": files.Code, "pipeline_flowdef_test.go": files.Test} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./examples/pipeline", name)
		}
	}
}

// TestDisagreementFailsToCompile builds the example with a step whose Go
// signature no longer matches the definition's generated interface: the
// build must fail, naming the interface.
func TestDisagreementFailsToCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a package")
	}
	t.Parallel()
	dir, err := filepath.Abs("../../examples/pipeline")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := os.ReadFile(filepath.Join(dir, "steps.go"))
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(steps),
		"func (s steps) Publish(ctx context.Context, in PublishInput) (PublishOutput, error) {",
		"func (s steps) Publish(ctx context.Context, in LoadOutput) (PublishOutput, error) {\n\tif true {\n\t\treturn PublishOutput{}, nil\n\t}", 1)
	if broken == string(steps) {
		t.Fatal("the example's Publish changed: update this test")
	}
	tmp := t.TempDir()
	replacement := filepath.Join(tmp, "steps.go")
	if err := os.WriteFile(replacement, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(dir, "steps.go"): replacement}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "overlay.json"), overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-overlay", filepath.Join(tmp, "overlay.json"), "-o", os.DevNull, ".")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("the example built with a Publish step of the wrong input type")
	}
	if !strings.Contains(string(out), "PipelineSteps") {
		t.Fatalf("build failed, but not on the steps interface:\n%s", out)
	}
}

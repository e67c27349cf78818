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
	for _, example := range []string{"pipeline", "billing"} {
		dir := "../../examples/" + example
		src, err := os.ReadFile(filepath.Join(dir, example+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		d, err := flowdef.Validate(example+".yaml", src, nil)
		if err != nil {
			t.Fatal(err)
		}
		files, err := defgen.Generate(d, defgen.Options{Package: "main", File: example + ".yaml", Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string][]byte{example + "_flowdef.go": files.Code, example + "_flowdef_test.go": files.Test} {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s is stale: run go generate ./examples/%s", name, example)
			}
		}
	}
}

// TestDisagreementFailsToCompile builds the example, without generating
// it again, with steps that no longer agree with the definition: the
// build must fail, naming what disagrees.
func TestDisagreementFailsToCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a package")
	}
	t.Parallel()
	for _, c := range []struct {
		name string
		// edits replace old with new in steps.go, in order.
		edits [][2]string
		want  string // in the compiler's message
	}{{
		// Publish's signature no longer matches the generated interface.
		name: "signature",
		edits: [][2]string{{
			"func (s steps) Publish(ctx context.Context, in PublishInput) (PublishOutput, error) {",
			"func (s steps) Publish(ctx context.Context, in LoadOutput) (PublishOutput, error) {\n\tif true {\n\t\treturn PublishOutput{}, nil\n\t}",
		}},
		want: "PipelineSteps",
	}, {
		// The load step's input loses a field its with: sets.
		name:  "input field",
		edits: [][2]string{{"\tChecksums []uint32 `json:\"checksums\"`\n", ""}},
		want:  "loadInput.Checksums undefined",
	}, {
		// The load step's output loses a field its set: reads.
		name: "output field",
		edits: [][2]string{
			{"\tRows  int    `json:\"rows\"`\n}\n\ntype PublishInput", "}\n\ntype PublishInput"},
			{"LoadOutput{Table: table, Rows: in.Rows}", "LoadOutput{Table: table}"},
		},
		want: "loadOutput.Rows undefined",
	}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, err := buildExampleWith(t, c.edits)
			if err == nil {
				t.Fatal("the example built with steps that disagree with the definition")
			}
			if !strings.Contains(out, c.want) {
				t.Fatalf("build failed, but without %q:\n%s", c.want, out)
			}
		})
	}
}

// buildExampleWith builds examples/pipeline with steps.go edited (through
// an overlay, so the example stays as it is) and returns the go command's
// output.
func buildExampleWith(t *testing.T, edits [][2]string) (string, error) {
	t.Helper()
	dir, err := filepath.Abs("../../examples/pipeline")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := os.ReadFile(filepath.Join(dir, "steps.go"))
	if err != nil {
		t.Fatal(err)
	}
	broken := string(steps)
	for _, e := range edits {
		next := strings.Replace(broken, e[0], e[1], 1)
		if next == broken {
			t.Fatalf("steps.go has no %q: update this test", e[0])
		}
		broken = next
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
	return string(out), err
}

// TestMissingFieldFailsToGenerate: a field the definition names that the
// Go type lacks is reported at generation, at its place in the
// definition, naming the type; so is a step type the package lacks.
func TestMissingFieldFailsToGenerate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const types = `package p

type Base struct {
	ID string ` + "`json:\"id\"`" + `
}

type FetchInput struct {
	Base
	URL string ` + "`json:\"url\"`" + `
}

type FetchOutput struct {
	Body string ` + "`json:\"body\"`" + `
}
`
	if err := os.WriteFile(filepath.Join(dir, "types.go"), []byte(types), 0o644); err != nil {
		t.Fatal(err)
	}
	generate := func(def string) (defgen.Files, error) {
		t.Helper()
		d, err := flowdef.Validate("f.yaml", []byte(def), nil)
		if err != nil {
			t.Fatal(err)
		}
		return defgen.Generate(d, defgen.Options{Package: "p", File: "f.yaml", Dir: dir})
	}
	const ok = `name: f
version: 1
steps:
  - id: fetch
    uses: fetch
    with: {id: '"1"', url: '"https://example.com"'}
outputs:
  body: {value: steps.fetch.output.body}
`
	files, err := generate(ok)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"_ = fetchInput.Base.ID\n", "_ = fetchInput.URL\n", "_ = fetchOutput.Body\n"} {
		if !bytes.Contains(files.Code, []byte(want)) {
			t.Errorf("the generated code lacks %q:\n%s", want, files.Code)
		}
	}

	_, err = generate(strings.Replace(ok, "steps.fetch.output.body", "steps.fetch.output.status", 1))
	if err == nil || !strings.Contains(err.Error(), "f.yaml:8:") || !strings.Contains(err.Error(), "FetchOutput") || !strings.Contains(err.Error(), `"status"`) {
		t.Errorf("missing output field: err = %v", err)
	}
	_, err = generate(strings.Replace(ok, "url:", "uri:", 1))
	if err == nil || !strings.Contains(err.Error(), "f.yaml:6:") || !strings.Contains(err.Error(), "FetchInput") || !strings.Contains(err.Error(), `"uri"`) {
		t.Errorf("missing input field: err = %v", err)
	}
	_, err = generate(strings.Replace(ok, "uses: fetch", "uses: get", 1))
	if err == nil || !strings.Contains(err.Error(), "GetInput") {
		t.Errorf("missing type: err = %v", err)
	}
}

package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtest"
	"github.com/flowlite/flowlite/flow/flowui"
)

// TestRun runs the program.
func TestRun(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(t.Context(), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	const want = `ada: batch-ada, 375 cents, notified: true
bob: batch-bob, 125 cents, notified: false
cy: rolled back
voided: [batch-cy]; log: [notified ada of 375 cents]
stored: billing version 1
`
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestGeneratedWorkflow runs the generated workflow on the test kit (and
// the backend FLOWLITE_TEST_BACKEND names), for issue 22: a Notify the
// caller set to false wins over the default true (item 1), Await takes
// the generated run handle and gives the typed output, whose cents are an
// int (item 4), and Register stored the definition (item 5).
func TestGeneratedWorkflow(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	s := &steps{}
	billing, err := NewBilling(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := billing.Register(t.Context(), env.Engine); err != nil {
		t.Fatal(err)
	}
	in := BillingInput{Customer: "bob", Lines: []any{"widget", "gadget"}, Notify: false}
	run, err := billing.Start(t.Context(), env.Engine, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := flowtest.Await(env, run)
	if err != nil {
		t.Fatal(err)
	}
	if out != (BillingOutput{Batch: "batch-bob", Cents: 375, Notified: false}) || len(s.log) != 0 {
		t.Fatalf("output %+v, log %v; want 375 cents, not notified", out, s.log)
	}
	for _, a := range env.Attempts(run.ID()) {
		if a.Step == "notify" {
			t.Errorf("the notify step ran: %+v", a)
		}
	}
	def, err := env.Engine.GetDefinition(t.Context(), "billing", 1)
	if err != nil {
		t.Fatalf("the registered definition is not stored: %v", err)
	}
	src, err := os.ReadFile("billing.yaml")
	if err != nil || !bytes.Equal(def.Body, src) {
		t.Fatalf("stored body differs from billing.yaml (%v)", err)
	}
	// So the dashboard draws the run's DAG.
	ui, err := flowui.New(env.Engine, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	ui.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/runs/"+run.ID(), nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `id="dag"`) {
		t.Errorf("GET /runs/%s: %d, no DAG:\n%s", run.ID(), rec.Code, rec.Body.String())
	}
}

// TestDocumentationShowsThisExample: docs/workflows-as-data.md shows
// these files as they are, so that the example a reader copies is the
// one these tests run (and cmd/flowdefgen's test builds in a new module).
func TestDocumentationShowsThisExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "workflows-as-data.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"billing.yaml", "gen.go", "steps.go", "main.go"} {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(doc, src) {
			t.Errorf("docs/workflows-as-data.md does not show %s as it is", name)
		}
	}
}

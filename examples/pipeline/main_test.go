package main

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowdef"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// TestRun runs the program: clicks published, orders held back, refunds
// rolled back with its table dropped.
func TestRun(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(t.Context(), nil, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"clicks   loaded 7 rows into clicks_v1, published at https://data.example/clicks_v1",
		"orders   loaded 7 rows into orders_v1, not approved for publication",
		"refunds  rolled back:",
		"tables left: [clicks_v1 orders_v1]; published: [clicks_v1]",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestTransformStepAlone tests one step in isolation, through the engine,
// with the generated step value.
func TestTransformStepAlone(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	got, err := flowtest.RunStep(env, PipelineTransformStep(steps{w: newWarehouse()}), TransformInput{Batch: []string{"a", "b"}})
	if err != nil || got.Rows != 2 || got.Checksum == 0 {
		t.Fatalf("transform: %+v, %v", got, err)
	}
}

// TestRejectedRefundIsRolledBack runs the definition on the test kit: the
// publisher refuses, and the load is compensated after the transforms ran.
func TestRefusedPublishCompensatesLoad(t *testing.T) {
	t.Parallel()
	wh := newWarehouse()
	p, err := NewPipeline(steps{w: wh}, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := flowtest.New(t, nil)
	typed := NewPipelineInput()
	typed.Dataset = "refunds"
	in, err := flowdef.ToValues(typed)
	if err != nil {
		t.Fatal(err)
	}
	run := flowtest.Start(env, p.Workflow().Flow(), in, nil)
	if _, err := flow.Signal(t.Context(), env.Engine, run.ID(), "approve", approval{Approved: true}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := flowtest.Await(env, run); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("err = %v, want rolled back", err)
	}
	if got := env.Compensated(run.ID()); !slices.Equal(got, []string{"load"}) {
		t.Fatalf("compensated %v", got)
	}
	if tables, _ := wh.snapshot(); len(tables) != 0 {
		t.Fatalf("tables left %v", tables)
	}
}

// TestApprovalTimesOut: without a decision within 48h the run fails and
// the load is undone (the test clock passes the 48 hours at once).
func TestApprovalTimesOut(t *testing.T) {
	t.Parallel()
	wh := newWarehouse()
	p, err := NewPipeline(steps{w: wh}, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := flowtest.New(t, nil)
	_, _, err = flowtest.RunWorkflow(env, p.Workflow().Flow(), flowdef.Values{"dataset": "clicks"})
	if !errors.Is(err, flow.ErrRolledBack) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("err = %v", err)
	}
	if tables, _ := wh.snapshot(); len(tables) != 0 {
		t.Fatalf("tables left %v", tables)
	}
}

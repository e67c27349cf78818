package flowhistory_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowhistory"
)

func sample() *flowhistory.History {
	at := time.Date(2026, 12, 1, 10, 0, 0, 123e6, time.UTC)
	return &flowhistory.History{
		ExportedAt: at,
		Run: flowhistory.Run{ID: "order-1", Workflow: "place_order", Version: 2, Queue: "orders", Status: "completed",
			Input: json.RawMessage(`{"id":"1"}`), Output: json.RawMessage(`"ch_1"`), CreatedAt: at},
		Steps: []flowhistory.Step{{Name: "charge", Position: 0, Status: "completed", Attempts: 2,
			Input: json.RawMessage(`1250`), Output: json.RawMessage(`"ch_1"`), Compensation: "none", StartedAt: at, FinishedAt: at}},
		Signals: []flowhistory.Signal{{ID: 7, Name: "approve", Payload: json.RawMessage(`true`), SentAt: at, ReceivedBy: "flow.receive:approve#0 of run order-1"}},
		Events:  []flowhistory.Event{{ID: 1, At: at, Kind: "run_started"}, {ID: 2, At: at, Kind: "step_started", Step: "charge", Attempt: 1}},
	}
}

// A history written and read back is the same history, with its format
// and version set.
func TestWriteRead(t *testing.T) {
	t.Parallel()
	h := sample()
	var buf bytes.Buffer
	if err := h.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"format": "flowlite-history"`) || !strings.Contains(buf.String(), `"version": 1`) {
		t.Fatalf("written without its format and version:\n%s", buf.String())
	}
	got, err := flowhistory.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// Write indents embedded values with the rest; they mean the same.
	var compact bytes.Buffer
	if err := json.Compact(&compact, got.Run.Input); err != nil {
		t.Fatal(err)
	}
	got.Run.Input = compact.Bytes()
	if !reflect.DeepEqual(got, h) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, h)
	}
}

func TestReadRefuses(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := sample().Write(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.String()
	for _, tt := range []struct{ name, in, want string }{
		{"empty", "", "not a JSON object"},
		{"array", "[]", "not a JSON object"},
		{"no format", `{"version": 1}`, `no "format" field`},
		{"other format", `{"format": "x", "version": 1}`, `format "x", want "flowlite-history"`},
		{"version 0", `{"format": "flowlite-history", "version": 0}`, "format version 0 is not supported"},
		{"wrong type", `{"format": "flowlite-history", "version": 1, "run": []}`, "version 1:"},
		{"no workflow", strings.Replace(good, `"workflow": "place_order"`, `"workflow": ""`, 1), "run.workflow is empty"},
		{"duplicate step", strings.Replace(good, `"steps": [`, `"steps": [{"name": "charge", "occurrence": 0, "status": "completed", "input": 1},`, 1), "step charge#0 appears twice"},
		{"event without kind", strings.Replace(good, `"kind": "run_started"`, `"kind": ""`, 1), "events[0] has no kind"},
	} {
		_, err := flowhistory.Read(strings.NewReader(tt.in))
		if !errors.Is(err, flowhistory.ErrFormat) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want ErrFormat saying %q", tt.name, err, tt.want)
		}
	}
}

package pgstore

import (
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/flowlite/flowlite/internal/store"
)

// finishRow is one item of the JSON document RunFinishMany reads; bytes
// are hex, and absent keys read as null.
type finishRow struct {
	ID          string  `json:"id"`
	Owner       string  `json:"owner"`
	Fence       int64   `json:"fence"`
	Status      string  `json:"status"`
	Output      *string `json:"output,omitempty"`
	Error       string  `json:"error"`
	Reason      string  `json:"reason"`
	FinishedAt  *int64  `json:"finished_at,omitempty"`
	Now         int64   `json:"now"`
	Step        *string `json:"step,omitempty"`
	Occurrence  int     `json:"occurrence"`
	StepOutput  *string `json:"step_output,omitempty"`
	Compensable bool    `json:"compensable"`
	CompletedAt int64   `json:"completed_at"`
}

// newFinishRow returns the row of it.
func newFinishRow(it store.RunFinishItem) finishRow {
	r := finishRow{
		ID: it.Lease.RunID, Owner: it.Lease.Owner, Fence: it.Lease.Fence,
		Status: string(it.Finish.Status), Output: optionalHex(it.Finish.Output),
		Error: it.Finish.Error, Reason: it.Finish.Reason, Now: it.Finish.Now,
	}
	if it.Finish.FinishedAt != 0 {
		r.FinishedAt = &it.Finish.FinishedAt
	}
	if s := it.Step; s != nil {
		r.Step, r.Occurrence, r.StepOutput = &s.Key.Name, s.Key.Occurrence, optionalHex(s.Output)
		r.Compensable, r.CompletedAt = s.Compensable, s.Now
	}
	return r
}

// optionalHex is b in hex, or nil for a nil b (a NULL, not an empty value).
func optionalHex(b []byte) *string {
	if b == nil {
		return nil
	}
	h := hex.EncodeToString(b)
	return &h
}

// stepBeginRow is one step of the JSON document StepBeginNewMany reads;
// absent keys read as null.
type stepBeginRow struct {
	RunID      string `json:"run_id"`
	Name       string `json:"name"`
	Occurrence int    `json:"occurrence"`
	Input      string `json:"input"` // hex
	Position   *int   `json:"position,omitempty"`
	Now        int64  `json:"now"`
}

// newStepBeginRow returns the row of p; a negative position (unknown) is
// null.
func newStepBeginRow(p store.StepBeginParams) stepBeginRow {
	r := stepBeginRow{RunID: p.Key.RunID, Name: p.Key.Name, Occurrence: p.Key.Occurrence, Input: hex.EncodeToString(p.Input), Now: p.Now}
	if p.Position >= 0 {
		r.Position = &p.Position
	}
	return r
}

// firstStepRow is one step of the JSON document RunClaimAndBegin reads.
type firstStepRow struct {
	Workflow string `json:"workflow"`
	Version  int    `json:"version"`
	Step     string `json:"step"`
	Input    string `json:"input"` // hex
	Lean     bool   `json:"lean"`
}

// firstStepsJSON is the document of steps.
func firstStepsJSON(steps []store.FirstStep) (json.RawMessage, error) {
	rows := make([]firstStepRow, len(steps))
	for i, f := range steps {
		rows[i] = firstStepRow{Workflow: f.Workflow.Name, Version: f.Workflow.Version, Step: f.Name, Input: hex.EncodeToString(f.Input), Lean: f.Lean}
	}
	doc, err := json.Marshal(rows)
	if err != nil {
		return nil, fmt.Errorf("encode first steps: %w", err)
	}
	return doc, nil
}

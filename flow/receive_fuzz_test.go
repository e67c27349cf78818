package flow

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/internal/engine"
)

// decision is the kind of struct a workflow receives.
type decision struct {
	Approved bool     `json:"approved"`
	By       string   `json:"by"`
	Amount   float64  `json:"amount"`
	Notes    []string `json:"notes"`
}

// FuzzReceivePayload feeds the decode path of Receive signal payloads that
// may be anything: a sender of another type, the CLI, a hand-edited row.
// The check Receive gives the engine must never panic; it must refuse what
// is not JSON, naming the type; and a payload it accepts must give the
// workflow the same value when the run first receives it and on every
// replay, after the engine recorded it (engine.Received), so that an
// accepted signal can never wedge the run.
func FuzzReceivePayload(f *testing.F) {
	for _, seed := range []string{
		`{"approved":true,"by":"ann","amount":12.5,"notes":["ok"]}`, `{"approve":"yes"}`, `"approved"`,
		`null`, `{"approved":1}`, `{"amount":1e400}`, `{"by":"\u00e9\ud800"}`, "{\"by\":\"\xff\"}", ` {"notes":[]} `,
		`{"approved":true}}`, `[]`, `7`, ``, `{"by":"<&>"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		checkReceive[decision](t, payload)
		checkReceive[*decision](t, payload)
		checkReceive[int](t, payload)
		checkReceive[string](t, payload)
		checkReceive[map[string]any](t, payload)
		checkReceive[json.RawMessage](t, payload)
	})
}

// checkReceive checks both ways Receive decodes: tolerant and strict.
func checkReceive[T any](t *testing.T, payload []byte) {
	t.Helper()
	checkDecode[T](t, payload, false)
	checkDecode[T](t, payload, true)
}

func checkDecode[T any](t *testing.T, payload []byte, strict bool) {
	t.Helper()
	first, err := decodeSignal[T](payload, strict)
	if err != nil {
		if !strings.HasPrefix(err.Error(), "decode into ") {
			t.Fatalf("decodeSignal(%q): error %q does not name the type", payload, err)
		}
		return
	}
	if !json.Valid(payload) {
		t.Fatalf("decodeSignal(%q) accepted invalid JSON", payload)
	}
	// What the engine records as the receive's outcome, and reads back on
	// every replay.
	out, err := json.Marshal(engine.Received{Payload: payload})
	if err != nil {
		t.Fatalf("record accepted payload %q: %v", payload, err)
	}
	var r engine.Received
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("read back recorded payload %q: %v", out, err)
	}
	replayed, err := decodeSignal[T](r.Payload, strict)
	if err != nil {
		t.Fatalf("payload %q was accepted but its record %q does not decode: %v", payload, out, err)
	}
	if raw, ok := any(first).(json.RawMessage); ok {
		// Raw payloads come back compacted: compare them as values, with
		// numbers kept as written (1e400 is JSON but no float64).
		a, err := jsonValue(raw)
		if err != nil {
			t.Fatalf("accepted raw payload %q does not decode: %v", raw, err)
		}
		b, err := jsonValue(any(replayed).(json.RawMessage))
		if err != nil {
			t.Fatalf("raw payload %q replays as %q, which does not decode: %v", raw, any(replayed).(json.RawMessage), err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("raw payload %q replays as %q", raw, any(replayed).(json.RawMessage))
		}
		return
	}
	if !reflect.DeepEqual(first, replayed) {
		t.Fatalf("payload %q: received %#v, replayed %#v", payload, first, replayed)
	}
}

// jsonValue decodes one JSON value, numbers as json.Number.
func jsonValue(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

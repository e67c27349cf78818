package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// show --at rebuilds the saga fixture's run as it stood after each event:
// right after reserve completed, reserve is done with its output and
// nothing is compensated yet; at its last event the run is what show
// prints now.
func TestShowAt(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	events := decode[[]eventJSON](t, ok(t, path, "history", "--json", sagaRun))
	var reserved time.Time
	for _, ev := range events {
		if ev.Kind == "step_completed" && ev.Step == "reserve" {
			reserved = ev.At
		}
	}
	if reserved.IsZero() {
		t.Fatalf("no step_completed of reserve in %+v", events)
	}
	then := decode[runAtJSON](t, ok(t, path, "show", "--json", "--at", reserved.Format(time.RFC3339Nano), sagaRun))
	if then.Run.Status != "running" || len(then.Run.Steps) == 0 {
		t.Fatalf("after reserve completed: %+v", then.Run)
	}
	r := then.Run.Steps[0]
	if r.Name != "reserve" || r.Status != "completed" || string(r.Output) != `"res-lamp"` || r.Compensation != "none" {
		t.Errorf("reserve after it completed: %+v", r)
	}

	last := events[len(events)-1].At
	final := decode[runAtJSON](t, ok(t, path, "show", "--json", "--at", last.Format(time.RFC3339Nano), sagaRun))
	now := decode[runDetailJSON](t, ok(t, path, "show", "--json", sagaRun))
	if final.Events != len(events) || final.Run.Status != now.Status || final.Run.Error != now.Error ||
		!reflect.DeepEqual(generic(t, final.Run.Steps), generic(t, now.Steps)) {
		t.Errorf("at the last event:\n%+v\nnow:\n%+v", final.Run, now)
	}

	// +DURATION counts from the first event; the text output says when.
	out := ok(t, path, "show", "--at", "+0s", sagaRun)
	if !strings.HasPrefix(out, "As of ") || !strings.Contains(out, "Run  ") {
		t.Errorf("show --at +0s:\n%s", out)
	}
}

func TestShowAtBadInput(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	fails(t, exitUsage, `invalid --at "yesterday-ish"`, "--db", path, "show", "--at", "yesterday-ish", sagaRun)
	fails(t, exitUsage, `invalid --at "+soon"`, "--db", path, "show", "--at", "+soon", sagaRun)
	fails(t, exitError, "instant before the run existed", "--db", path, "show", "--at", "2000-01-01", sagaRun)
	fails(t, exitError, "run nope: not found", "--db", path, "show", "--at", "1h", "nope")
}

// generic returns v as encoding/json decodes it into an any, so that JSON
// values indented differently compare equal.
func generic(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

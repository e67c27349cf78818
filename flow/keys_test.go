package flow_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

var keysEcho = flow.Workflow[int, int]{Name: "keys_echo", Run: func(_ flow.Context, n int) (int, error) { return n, nil }}

var keysJob = flow.Job[int]{Name: "keys_job", Handler: func(context.Context, int) error { return nil }}

// keysParent starts a child with the run ID it is given.
var keysParent = flow.Workflow[string, int]{Name: "keys_parent", Run: func(wc flow.Context, id string) (int, error) {
	return flow.Call(wc, keysEcho, 1, &flow.ChildOptions{RunID: id})
}}

// Run IDs, unique keys, concurrency keys and debounce keys follow the rules
// of names, with the same NameError, on every way a run starts; nothing is
// recorded. Before, "a\nb" was accepted as a run ID (issue 22).
func TestRunIDsAndKeysFollowTheRulesOfNames(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	flow.Register(e, keysEcho)
	flow.Register(e, keysParent)
	flow.RegisterJob(e, keysJob)

	bad := map[string]string{
		"a\nb":                    "contains the control or line-break character U+000A at byte 1",
		"tab\there":               "U+0009",
		"nul\x00":                 "U+0000",
		"   ":                     "is only white space",
		"\xff":                    "is not valid UTF-8",
		"a\u2028b":                "U+2028",
		strings.Repeat("x", 1025): "is 1025 bytes long, over the limit of 1024",
	}
	debounce := func(key string) *flow.Debounce { return &flow.Debounce{Key: key, Window: time.Second} }
	for value, rule := range bad {
		starts := map[string]struct {
			kind string
			call func() error
		}{
			"Start RunID": {"run ID", func() error { _, err := flow.Start(ctx, e, keysEcho, 1, &flow.StartOptions{RunID: value}); return err }},
			"Start UniqueKey": {"unique key", func() error {
				_, err := flow.Start(ctx, e, keysEcho, 1, &flow.StartOptions{UniqueKey: value})
				return err
			}},
			"Start ConcurrencyKey": {"concurrency key", func() error {
				_, err := flow.Start(ctx, e, keysEcho, 1, &flow.StartOptions{ConcurrencyKey: value})
				return err
			}},
			"Start Debounce.Key": {"debounce key", func() error {
				_, err := flow.Start(ctx, e, keysEcho, 1, &flow.StartOptions{Debounce: debounce(value)})
				return err
			}},
			"StartMany RunID": {"run ID", func() error {
				_, err := flow.StartMany(ctx, e, keysEcho, []flow.StartItem[int]{{In: 1}, {In: 2, Opts: &flow.StartOptions{RunID: value}}})
				return err
			}},
			"Enqueue RunID": {"run ID", func() error {
				_, err := flow.Enqueue(ctx, e, keysJob, 1, &flow.EnqueueOptions{RunID: value})
				return err
			}},
			"Enqueue UniqueKey": {"unique key", func() error {
				_, err := flow.Enqueue(ctx, e, keysJob, 1, &flow.EnqueueOptions{UniqueKey: value})
				return err
			}},
			"Enqueue ConcurrencyKey": {"concurrency key", func() error {
				_, err := flow.Enqueue(ctx, e, keysJob, 1, &flow.EnqueueOptions{ConcurrencyKey: value})
				return err
			}},
			"EnqueueMany UniqueKey": {"unique key", func() error {
				_, err := flow.EnqueueMany(ctx, e, keysJob, []flow.EnqueueItem[int]{{Args: 1, Opts: &flow.EnqueueOptions{UniqueKey: value}}})
				return err
			}},
			"EnqueueMany ConcurrencyKey": {"concurrency key", func() error {
				_, err := flow.EnqueueMany(ctx, e, keysJob, []flow.EnqueueItem[int]{{Args: 1, Opts: &flow.EnqueueOptions{ConcurrencyKey: value}}})
				return err
			}},
		}
		for name, s := range starts {
			err := s.call()
			var ne *flow.NameError
			if !errors.As(err, &ne) || !errors.Is(err, flow.ErrInvalidName) || ne.Kind != s.kind || ne.Name != value {
				t.Errorf("%s %q: %v, want a NameError for the %s", name, value, err, s.kind)
				continue
			}
			if msg := err.Error(); !strings.Contains(msg, "invalid "+s.kind+" ") || !strings.Contains(msg, rule) || strings.Contains(msg, "\n") {
				t.Errorf("%s %q: message %q does not name the %s and the rule %q on one line", name, value, msg, s.kind, rule)
			}
		}
	}
	if runs, err := e.ListRuns(ctx, flow.RunFilter{}); err != nil || len(runs) != 0 {
		t.Fatalf("refused starts recorded %d runs (%v)", len(runs), err)
	}

	// A child's run ID is checked when the parent starts it: the parent's
	// workflow gets the NameError and fails.
	startEngine(t, e)
	parent, err := flow.Start(ctx, e, keysParent, "child\nid", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parent.Result(ctx); err == nil || !strings.Contains(err.Error(), `invalid run ID "child\nid"`) {
		t.Fatalf("parent with a bad child ID: %v, want the NameError", err)
	}
}

// IDs and keys that were valid stay valid: the engine's own IDs, UUIDs,
// IDs with ':' '/' '#' and spaces, non-ASCII text, and the longest allowed.
func TestValidRunIDsAndKeysAreAccepted(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	flow.Register(e, keysEcho)
	for _, id := range []string{
		"0f8fad5b-d9cb-469f-a165-70867728950e", "order:42/charge#1", "tenant a/run 7", "größe-ß", strings.Repeat("k", flow.MaxKeyBytes),
	} {
		r, err := flow.Start(ctx, e, keysEcho, 1, &flow.StartOptions{RunID: id, UniqueKey: "u:" + id[:min(len(id), 1000)], ConcurrencyKey: id[:min(len(id), 256)]})
		if err != nil {
			t.Errorf("start %q: %v", id, err)
			continue
		}
		if r.ID() != id {
			t.Errorf("run ID %q, want %q", r.ID(), id)
		}
	}
	if r, err := flow.Start(ctx, e, keysEcho, 1, nil); err != nil || r.ID() == "" {
		t.Errorf("start with a generated ID: %v", err)
	}
}

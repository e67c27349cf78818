package flowtest_test

import (
	"context"
	"fmt"
	"github.com/flowlite/flowlite/internal/pgtest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.Cleanup(pgtest.OwnDatabase())) }

// recorder collects strings from step bodies and compensations, which run
// on engine goroutines.
type recorder struct {
	mu    sync.Mutex
	items []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.items = append(r.items, s)
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.items)
}

// counter counts calls from engine goroutines.
type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) inc() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
}

func (c *counter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// attemptsOf keeps the attempts of one step (not its compensation).
func attemptsOf(all []flowtest.Attempt, step string, compensation bool) []flowtest.Attempt {
	var out []flowtest.Attempt
	for _, a := range all {
		if a.Step == step && a.Compensation == compensation {
			out = append(out, a)
		}
	}
	return out
}

func stepRecord(t *testing.T, info flow.RunInfo, name string, occurrence int) flow.StepRecord {
	t.Helper()
	for _, s := range info.Steps {
		if s.Name == name && s.Occurrence == occurrence {
			return s
		}
	}
	t.Fatalf("run %s has no step %s#%d", info.ID, name, occurrence)
	return flow.StepRecord{}
}

func eventKinds(events []flow.Event) []string {
	kinds := make([]string, len(events))
	for i, ev := range events {
		kinds[i] = ev.Kind
	}
	return kinds
}

// exampleT stands in, in examples, for the *testing.T a real test passes to
// flowtest.New.
type exampleT struct {
	dir      string
	cleanups []func()
}

func (t *exampleT) Helper() {}

func (t *exampleT) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }

func (t *exampleT) TempDir() string {
	if t.dir == "" {
		dir, err := os.MkdirTemp("", "flowtest-example-")
		if err != nil {
			panic(err)
		}
		t.dir = dir
	}
	return t.dir
}

func (t *exampleT) Errorf(format string, args ...any) { fmt.Printf("error: "+format+"\n", args...) }

func (t *exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// finish runs the cleanups, as the testing package does after a test.
func (t *exampleT) finish() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	if t.dir != "" {
		_ = os.RemoveAll(t.dir)
	}
}

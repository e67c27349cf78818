package flowotel_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowotel"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSpans(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())

	var calls atomic.Int32
	flaky := flow.Step[int, int]{
		Name: "flaky",
		Run: func(_ context.Context, n int) (int, error) {
			if calls.Add(1) == 1 {
				return 0, errors.New("transient")
			}
			return n + 1, nil
		},
		Compensate: func(context.Context, int, int) error { return nil },
		Retry:      &flow.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond},
	}
	fail := flow.Step[int, int]{
		Name: "fail",
		Run:  func(context.Context, int) (int, error) { return 0, flow.Permanent(errors.New("no")) },
	}
	wf := flow.Workflow[int, int]{Name: "traced", Run: func(wc flow.Context, n int) (int, error) {
		m, err := flow.Do(wc, flaky, n)
		if err != nil {
			return 0, err
		}
		return flow.Do(wc, fail, m)
	}}

	e, err := flowsqlite.Open(ctx, filepath.Join(t.TempDir(), "flow.db"), &flow.Config{
		PollInterval: 5 * time.Millisecond,
		Intercept:    flowotel.Interceptor(&flowotel.Options{TracerProvider: tp}),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	flow.Register(e, wf)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	run, err := flow.Start(ctx, e, wf, 1, &flow.StartOptions{RunID: "traced-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("result: %v", err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	spans := rec.Ended()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
		if s.SpanContext().TraceID() != flowotel.RunTraceID("traced-1") {
			t.Errorf("span %s is in trace %s, not the run's", s.Name(), s.SpanContext().TraceID())
		}
	}
	want := []string{"step flaky", "step flaky", "step fail", "compensate flaky"}
	if len(names) != len(want) {
		t.Fatalf("spans %q, want %q", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("spans %q, want %q", names, want)
		}
	}
	first, retry := spans[0], spans[1]
	if first.Status().Code != codes.Error || len(first.Events()) == 0 {
		t.Errorf("failed attempt: status %v, events %v", first.Status(), first.Events())
	}
	if retry.Status().Code == codes.Error {
		t.Errorf("successful retry has status %v", retry.Status())
	}
	if links := retry.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != first.SpanContext().SpanID() {
		t.Errorf("retry links %+v, want the first attempt %s", retry.Links(), first.SpanContext().SpanID())
	}
	attrs := map[string]any{}
	for _, kv := range retry.Attributes() {
		attrs[string(kv.Key)] = kv.Value.AsInterface()
	}
	if attrs["flowlite.attempt"] != int64(2) || attrs["flowlite.run.id"] != "traced-1" || attrs["flowlite.step.name"] != "flaky" ||
		attrs["flowlite.workflow.name"] != "traced" || attrs["flowlite.compensation"] != false {
		t.Errorf("retry attributes: %v", attrs)
	}
	if len(spans[2].Links()) != 0 {
		t.Errorf("a first attempt has links: %v", spans[2].Links())
	}
}

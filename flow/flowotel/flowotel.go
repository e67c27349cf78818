// Package flowotel traces flowlite with OpenTelemetry: every step and
// compensation attempt becomes a span, through flow.Config.Intercept.
//
// All the attempts of one run share one trace, whose ID is derived from the
// run ID (RunTraceID), so a run that resumes in another process or after a
// restart still lands in the same trace. A retry's span links to the span
// of the attempt before it when this process ran that attempt.
//
//	cfg := &flow.Config{Intercept: flowotel.Interceptor(nil)}
//
// It imports flow and OpenTelemetry's API; the application chooses the SDK
// and exporter (otel.SetTracerProvider, or Options.TracerProvider).
package flowotel

import (
	"context"
	"crypto/sha256"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/flowlite/flowlite/flow"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/flowlite/flowlite/flow/flowotel"

// Span attributes.
const (
	AttrRunID        = attribute.Key("flowlite.run.id")
	AttrWorkflow     = attribute.Key("flowlite.workflow.name")
	AttrVersion      = attribute.Key("flowlite.workflow.version")
	AttrStep         = attribute.Key("flowlite.step.name")
	AttrOccurrence   = attribute.Key("flowlite.step.occurrence")
	AttrAttempt      = attribute.Key("flowlite.attempt")
	AttrCompensation = attribute.Key("flowlite.compensation")
)

// Options configure the interceptor. A nil *Options means the defaults.
type Options struct {
	// TracerProvider makes the tracer; default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Remember bounds how many step calls' last attempts are remembered for
	// retry links; default 10000. The oldest are forgotten first.
	Remember int
}

// Interceptor returns a flow.Interceptor that runs every step and
// compensation attempt in a span named "step NAME" or "compensate NAME". A
// failed attempt records its error and sets the span's status to Error.
func Interceptor(opts *Options) flow.Interceptor {
	if opts == nil {
		opts = &Options{}
	}
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	t := &tracer{t: tp.Tracer(ScopeName), max: opts.Remember, last: make(map[callKey]trace.SpanContext)}
	if t.max <= 0 {
		t.max = 10000
	}
	return t.intercept
}

// RunTraceID returns the ID of the trace that holds the spans of run runID.
func RunTraceID(runID string) trace.TraceID {
	return runSpanContext(runID).TraceID()
}

// runSpanContext is the parent of a run's attempts: a remote span that no
// process records, whose IDs every process derives from the run ID.
func runSpanContext(runID string) trace.SpanContext {
	h := sha256.Sum256([]byte("flowlite run " + runID))
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], h[:16])
	copy(sid[:], h[16:24])
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

// callKey names a step call (or its compensation) across its attempts.
type callKey struct {
	run, step    string
	occurrence   int
	compensation bool
}

type tracer struct {
	t   trace.Tracer
	max int

	mu    sync.Mutex
	last  map[callKey]trace.SpanContext
	order []callKey // insertion order, for forgetting the oldest
}

func (t *tracer) intercept(ctx context.Context, info flow.AttemptInfo, call func(context.Context) error) error {
	key := callKey{info.RunID, info.Step, info.Occurrence, info.Compensation}
	name := "step " + info.Step
	if info.Compensation {
		name = "compensate " + info.Step
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			AttrRunID.String(info.RunID),
			AttrWorkflow.String(info.Workflow.Name),
			AttrVersion.Int(info.Workflow.Version),
			AttrStep.String(info.Step),
			AttrOccurrence.Int(info.Occurrence),
			AttrAttempt.Int(info.Attempt),
			AttrCompensation.Bool(info.Compensation),
		),
	}
	if prev, ok := t.previous(key); ok && info.Attempt > 1 {
		opts = append(opts, trace.WithLinks(trace.Link{
			SpanContext: prev,
			Attributes:  []attribute.KeyValue{attribute.String("flowlite.link", "previous attempt")},
		}))
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, runSpanContext(info.RunID))
	}
	ctx, span := t.t.Start(ctx, name, opts...)
	defer span.End()
	t.remember(key, span.SpanContext())
	err := call(ctx)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "attempt "+strconv.Itoa(info.Attempt)+" failed: "+err.Error())
	}
	return err
}

func (t *tracer) previous(k callKey) (trace.SpanContext, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sc, ok := t.last[k]
	return sc, ok
}

func (t *tracer) remember(k callKey, sc trace.SpanContext) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.last[k]; !seen {
		t.order = append(t.order, k)
	}
	t.last[k] = sc
	for len(t.order) > t.max {
		delete(t.last, t.order[0])
		t.order = t.order[1:]
	}
}

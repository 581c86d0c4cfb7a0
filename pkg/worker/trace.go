package worker

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobgate/jobgate/internal/wire"
)

// tracerScope names this package's spans. They go to the process's global
// tracer provider: nothing is exported unless the worker's program installs
// one (the OpenTelemetry SDK); the handler's ctx carries the job's trace
// context either way.
const tracerScope = "github.com/jobgate/jobgate/pkg/worker"

// startHandlerSpan returns ctx with the attempt's remote span context (the
// assignment's traceparent and tracestate) and a span of the handler as its
// child. Without a traceparent, ctx as it is and a no-op span.
func startHandlerSpan(ctx context.Context, asg *wire.Assignment) (context.Context, trace.Span) {
	if asg.TraceParent == "" {
		return ctx, trace.SpanFromContext(context.Background())
	}
	ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": asg.TraceParent, "tracestate": asg.TraceState})
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	ctx, span := otel.Tracer(tracerScope).Start(ctx, "run "+asg.Type, trace.WithAttributes(
		attribute.String("jobgate.job.id", asg.ID), attribute.String("jobgate.job.type", asg.Type),
		attribute.String("jobgate.tenant", asg.Tenant), attribute.Int("jobgate.attempt", asg.Attempt)))
	// Without an SDK the span is a no-op carrying the attempt's context:
	// the handler's ctx still names the attempt's span.
	return ctx, span
}

package broker

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/tracing"
)

// jobCtx is ctx with rec's stored trace context, for a log line about
// the job outside its attempt's span (it then names the job's trace_id).
func jobCtx(ctx context.Context, rec *job.Record) context.Context {
	return tracing.Extract(ctx, rec.Trace, rec.TraceState)
}

// traceAttempt records the span of the attempt rec's verdict ended: from
// its claim to now, a child of the job's admission, under the id its
// worker was handed with the assignment (tracing.AttemptSpanID), so the
// worker's spans nest under it whichever broker took the claim. It returns
// a context of the span, for the verdict's log line.
func (b *Broker) traceAttempt(rec *job.Record, outcome, category string) context.Context {
	ctx := context.WithoutCancel(b.ctx)
	parent := tracing.SpanContext(rec.Trace, rec.TraceState)
	if !parent.IsValid() {
		return ctx
	}
	started := time.Time{}
	worker := ""
	for _, a := range rec.Attempts {
		if a.Attempt == rec.Attempt {
			started, worker = a.StartedAt, a.Worker
		}
	}
	if started.IsZero() && rec.StartedAt != nil {
		started = *rec.StartedAt
	}
	id := tracing.AttemptSpanID(parent.TraceID(), rec.Key(), rec.Attempt)
	sctx := tracing.WithSpanID(trace.ContextWithRemoteSpanContext(ctx, parent), id)
	_, span := tracing.Tracer().Start(sctx, "attempt "+rec.Type, trace.WithTimestamp(started),
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			attribute.String("jobgate.job.id", rec.ID), attribute.String("jobgate.job.type", rec.Type),
			attribute.String("jobgate.tenant", rec.Tenant), attribute.String("jobgate.worker", worker),
			attribute.Int("jobgate.attempt", rec.Attempt), attribute.String("jobgate.attempt.outcome", outcome)))
	if category != "" {
		span.SetAttributes(attribute.String("jobgate.error.category", category))
		span.SetStatus(codes.Error, category)
	}
	span.End()
	// The span as recorded when an SDK is installed; else the id the
	// worker was handed (log lines name it either way).
	return trace.ContextWithSpanContext(ctx, tracing.AttemptContext(rec.Trace, rec.TraceState, rec.Key(), rec.Attempt))
}

package gateway

import (
	"context"
	"strings"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/tracing"
)

// startAdmissionSpan starts the server span of an admission, continuing
// the trace of the request's traceparent and tracestate, if any. Its
// attributes name the job, never its params, key or token.
func startAdmissionSpan(c *fiber.Ctx) (context.Context, trace.Span) {
	parent := tracing.Extract(c.UserContext(), c.Get(tracing.HeaderParent), c.Get(tracing.HeaderState))
	if !tracing.Installed() {
		// Tracing off: the span would record nothing and carry the
		// caller's context, which parent holds already (the job keeps it).
		return parent, trace.SpanFromContext(parent)
	}
	route := c.Route().Path
	sctx, span := tracing.Tracer().Start(parent, c.Method()+" "+route, trace.WithSpanKind(trace.SpanKindServer),
		// Fiber's Method points into the request buffer, which the next
		// request reuses before the span is exported: a copy.
		trace.WithAttributes(attribute.String("http.request.method", strings.Clone(c.Method())), attribute.String("http.route", route)))
	return sctx, span
}

// jobSpanAttrs names the job on a span.
func jobSpanAttrs(span trace.Span, rec *job.Record) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("jobgate.job.id", rec.ID), attribute.String("jobgate.job.type", rec.Type),
		attribute.String("jobgate.tenant", rec.Tenant))
}

// endAdmissionSpan records the idempotency outcome (new, replayed,
// conflict, invalid, ...) and the response's status; the caller ends it.
func endAdmissionSpan(span trace.Span, c *fiber.Ctx, outcome string, err error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("jobgate.idempotency.outcome", outcome))
	if err != nil {
		span.SetStatus(codes.Error, outcome)
	}
	_ = c
}

// endSpan stamps the response's status on an admission span and ends it.
func endSpan(span trace.Span, c *fiber.Ctx) {
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("http.response.status_code", c.Response().StatusCode()))
	}
	span.End()
}

package notifier

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobgate/jobgate/internal/tracing"
)

// A notice is traced as its job's: the event carries the job's trace
// context (traceparent, tracestate headers written from the record by
// whoever published it), the router copies it onto each delivery task
// (a batch notice: its batch's, else its first item's), and each
// delivery attempt is a client span, a child of the job's admission,
// whose context a webhook sends as traceparent/tracestate so the
// receiver continues the trace. A span names the job, the attempt and
// the outcome, never the body, the secret, the URL (it may hold a token)
// nor a mail address. The log lines of a delivery are logged with its
// context, so they carry trace_id and span_id.

// Outcomes of a delivery attempt, as its span names them.
const (
	spanDelivered = "delivered"
	spanRetry     = "retry"
	spanFailed    = "failed"
	spanDisabled  = "disabled"
	spanRefused   = "refused"
	spanSent      = "sent"
	spanUncertain = "uncertain"
	spanRejected  = "rejected"
	spanCanceled  = "canceled"
	spanNotSent   = "not_sent"
)

// startDeliverySpan starts the client span of one delivery attempt of ev
// (attempt counts from 1; retries is how many retries the schedule
// allows after the first attempt).
func (n *Notifier) startDeliverySpan(ctx context.Context, name, channel string, ev *event, attempt int, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	ctx, span := tracing.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		kind := "job"
		if ev.batch != nil {
			kind = "batch"
		}
		span.SetAttributes(append(attrs,
			attribute.String("jobgate.notice.channel", channel), attribute.String("jobgate.notice.kind", kind),
			attribute.String("jobgate.job.id", ev.Job.ID), attribute.String("jobgate.job.state", string(ev.Job.State)),
			attribute.String("jobgate.tenant", ev.Tenant), attribute.String("jobgate.event.id", ev.ID),
			attribute.Int("jobgate.delivery.attempt", attempt), attribute.Int("jobgate.delivery.retries", len(n.cfg.Retries)),
		)...)
		if t := ev.Job.Type; t != "" {
			span.SetAttributes(attribute.String("jobgate.job.type", t))
		}
	}
	return ctx, span
}

// endDeliverySpan records an attempt's outcome and ends the span. The
// error's text is not recorded: an SMTP server's reply may quote the
// address.
func endDeliverySpan(span trace.Span, outcome string, attrs ...attribute.KeyValue) {
	if span.IsRecording() {
		span.SetAttributes(append(attrs, attribute.String("jobgate.delivery.outcome", outcome))...)
		switch outcome {
		case spanDelivered, spanSent:
		default:
			span.SetStatus(codes.Error, outcome)
		}
	}
	span.End()
}

package endpointcall

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobgate/jobgate/internal/tracing"
	"github.com/jobgate/jobgate/pkg/worker"
)

// Each request to an endpoint is a client span, a child of the attempt's
// run span (pkg/worker's, itself under the broker's attempt span), whose
// context the request carries as traceparent: the handler's own spans
// nest under it. It names the job, the attempt, the endpoint's host (never
// its path or query, which may hold a token of the team's) and the
// handler's answer: its status code and the outcome jobgate drew from it.
// An attempt answered 202 keeps its span open until the attempt ends, with
// an event per callback.

// Outcomes of a call, as its span names them (jobgate.endpoint.outcome)
// and jobgate_endpoint_outcomes_total counts them.
const (
	outcomeSucceeded = "succeeded" // 200, 201, 204; or a 202's done
	outcomeRetry     = "retry"     // 408, 425, 429, 5xx
	outcomeRejected  = "rejected"  // another 4xx, a 3xx, another 2xx
	outcomeTooLarge  = "too_large" // a result past max_result_bytes
	outcomeError     = "error"     // no answer: connection, TLS, a body cut short
	outcomeAborted   = "aborted"   // canceled, timed out, taken over or stopping
	outcomeFailed    = "failed"    // a 202's fail, or its attempt went quiet
)

// startCallSpan starts the span of attempt j's request to rawURL.
func startCallSpan(ctx context.Context, j *worker.Job[json.RawMessage], rawURL string) (context.Context, trace.Span) {
	ctx, span := tracing.Tracer().Start(ctx, "endpoint "+j.Type, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		host := ""
		if u, err := url.Parse(rawURL); err == nil {
			host = u.Host
		}
		span.SetAttributes(attribute.String("jobgate.job.id", j.ID), attribute.String("jobgate.job.type", j.Type),
			attribute.String("jobgate.tenant", j.Tenant), attribute.Int("jobgate.attempt", j.Attempt),
			attribute.String("http.request.method", http.MethodPost), attribute.String("server.address", host))
	}
	return ctx, span
}

// endCallSpan records the answer (status 0: none came) and its outcome
// (callOutcome), and ends the span. The error's text is not recorded: a
// handler's message is the operator's, in the attempt's history.
func endCallSpan(span trace.Span, status int, async bool, outcome string) {
	if span.IsRecording() {
		if status != 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", status))
		}
		span.SetAttributes(attribute.String("jobgate.endpoint.outcome", outcome), attribute.Bool("jobgate.endpoint.async", async))
		if outcome != outcomeSucceeded {
			span.SetStatus(codes.Error, outcome)
		}
	}
	span.End()
}

// callOutcome is what a call's answer and error came to.
func callOutcome(ctx context.Context, status int, async bool, err error) string {
	switch {
	case err == nil:
		return outcomeSucceeded
	case ctx.Err() != nil:
		return outcomeAborted
	case errors.Is(err, worker.ErrResultTooLarge):
		return outcomeTooLarge
	case async:
		return outcomeFailed
	case status == 0 || status == http.StatusOK || status == http.StatusCreated:
		return outcomeError
	case status == http.StatusRequestTimeout || status == http.StatusTooEarly || status == http.StatusTooManyRequests || status >= 500:
		return outcomeRetry
	}
	return outcomeRejected
}

// callbackEvent notes a 202's callback on its call's span.
func callbackEvent(ctx context.Context, op string, status int) {
	trace.SpanFromContext(ctx).AddEvent("callback "+op, trace.WithAttributes(attribute.Int("jobgate.callback.status", status)))
}

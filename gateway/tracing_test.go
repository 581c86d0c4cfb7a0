package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/tracing"
)

// recordSpans installs an SDK provider recording every span for the
// test's duration (not parallel: the provider is the process's).
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })
	return rec
}

// admissionSpans are the recorded admission spans of trace tid.
func admissionSpans(rec *tracetest.SpanRecorder, tid trace.TraceID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() == tid && s.Name() == "POST /v1/jobs" {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}

func TestAdmissionContinuesTheCallersTraceAndKeepsItWithTheJob(t *testing.T) {
	rec := recordSpans(t)
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	callerSC := tracing.SpanContext(caller, "")
	r := b.do(t, http.MethodPost, "/v1/jobs", tok, permit, "Idempotency-Key: secret-key-1", "traceparent: "+caller, "tracestate: shop=1")
	require.Equal(t, http.StatusAccepted, r.status)
	id := r.job(t).ID

	spans := admissionSpans(rec, callerSC.TraceID())
	require.Len(t, spans, 1, "one server span in the caller's trace")
	span := spans[0]
	require.Equal(t, trace.SpanKindServer, span.SpanKind())
	require.Equal(t, callerSC.SpanID(), span.Parent().SpanID(), "a child of the caller's span")
	require.Equal(t, "new", attr(span, "jobgate.idempotency.outcome"))
	require.Equal(t, id, attr(span, "jobgate.job.id"))
	require.Equal(t, "permit_report", attr(span, "jobgate.job.type"))
	require.Equal(t, "4", attr(span, "jobgate.tenant"))
	require.Equal(t, "202", attr(span, "http.response.status_code"))
	for _, a := range span.Attributes() {
		require.NotContains(t, a.Value.String(), "secret-key-1", "never the idempotency key")
		require.NotContains(t, a.Value.String(), "case_id", "never the params")
	}

	// The job keeps the admission span's context...
	stored, err := b.res.Jobs.Get(context.Background(), job.StoreKey("4", "reviewer-47", id))
	require.NoError(t, err)
	sc := tracing.SpanContext(stored.Trace, stored.TraceState)
	require.Equal(t, span.SpanContext().TraceID(), sc.TraceID())
	require.Equal(t, span.SpanContext().SpanID(), sc.SpanID())
	require.Equal(t, "shop=1", stored.TraceState)

	// A replay and a conflict are spans of their own requests' traces.
	const again = "00-4bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-01"
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/v1/jobs", tok, permit, "Idempotency-Key: secret-key-1", "traceparent: "+again).status)
	spans = admissionSpans(rec, tracing.SpanContext(again, "").TraceID())
	require.Len(t, spans, 1)
	require.Equal(t, "replayed", attr(spans[0], "jobgate.idempotency.outcome"))
	const other = "00-4bf92f3577b34da6a3ce929d0e0e4738-00f067aa0ba902b7-01"
	changed := strings.Replace(permit, `"revision":29`, `"revision":30`, 1)
	require.Equal(t, http.StatusConflict, b.do(t, http.MethodPost, "/v1/jobs", tok, changed, "Idempotency-Key: secret-key-1", "traceparent: "+other).status)
	spans = admissionSpans(rec, tracing.SpanContext(other, "").TraceID())
	require.Len(t, spans, 1)
	require.Equal(t, "conflict", attr(spans[0], "jobgate.idempotency.outcome"))

	// Without a traceparent the job starts a trace of its own.
	r = b.do(t, http.MethodPost, "/v1/jobs", tok, permit, "Idempotency-Key: k-2")
	require.Equal(t, http.StatusAccepted, r.status)
	stored, err = b.res.Jobs.Get(context.Background(), job.StoreKey("4", "reviewer-47", r.job(t).ID))
	require.NoError(t, err)
	require.True(t, tracing.SpanContext(stored.Trace, "").IsValid())
	require.NotEqual(t, callerSC.TraceID(), tracing.SpanContext(stored.Trace, "").TraceID())
}

// POST /v1/batches continues the caller's trace like POST /v1/jobs, and
// every item's record keeps the batch admission's context.
func TestBatchAdmissionContinuesTheCallersTraceAndEachItemKeepsIt(t *testing.T) {
	rec := recordSpans(t)
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4739-00f067aa0ba902b7-01"
	callerSC := tracing.SpanContext(caller, "")
	r := b.do(t, http.MethodPost, "/v1/batches", tok, batchBody(3, nil), "Idempotency-Key: secret-batch-key", "traceparent: "+caller, "tracestate: shop=2")
	require.Equal(t, http.StatusAccepted, r.status, "body: %s", r.body)
	v := r.batch(t)

	var span sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() == callerSC.TraceID() && s.Name() == "POST /v1/batches" {
			span = s
		}
	}
	require.NotNil(t, span, "a server span in the caller's trace")
	require.Equal(t, trace.SpanKindServer, span.SpanKind())
	require.Equal(t, callerSC.SpanID(), span.Parent().SpanID())
	require.Equal(t, "new", attr(span, "jobgate.idempotency.outcome"))
	require.Equal(t, v.ID, attr(span, "jobgate.batch.id"))
	require.Equal(t, "202", attr(span, "http.response.status_code"))
	for _, a := range span.Attributes() {
		require.NotContains(t, a.Value.String(), "secret-batch-key")
	}
	require.Len(t, v.ids(), 3)
	for _, id := range v.ids() {
		stored, err := b.res.Jobs.Get(context.Background(), job.StoreKey("4", "reviewer-47", id))
		require.NoError(t, err)
		sc := tracing.SpanContext(stored.Trace, stored.TraceState)
		require.Equal(t, span.SpanContext().TraceID(), sc.TraceID(), "item %s", id)
		require.Equal(t, span.SpanContext().SpanID(), sc.SpanID(), "item %s: a child of the batch's admission", id)
		require.Equal(t, "shop=2", stored.TraceState)
	}
}

// With no tracer provider installed (tracing off) no span is made, and the
// job still keeps the caller's trace context: its later steps and events
// carry the caller's trace.
func TestAdmissionWithTracingOffKeepsTheCallersTrace(t *testing.T) {
	require.False(t, tracing.Installed(), "no provider installed")
	_, b := setup(t)
	tok := b.token(t, "4", "reviewer-47", false)
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4739-00f067aa0ba902b7-01"
	r := b.do(t, http.MethodPost, "/v1/jobs", tok, permit, "Idempotency-Key: off-1", "traceparent: "+caller, "tracestate: shop=2")
	require.Equal(t, http.StatusAccepted, r.status)
	stored, err := b.res.Jobs.Get(context.Background(), job.StoreKey("4", "reviewer-47", r.job(t).ID))
	require.NoError(t, err)
	require.Equal(t, caller, stored.Trace)
	require.Equal(t, "shop=2", stored.TraceState)

	r = b.do(t, http.MethodPost, "/v1/jobs", tok, permit, "Idempotency-Key: off-2")
	require.Equal(t, http.StatusAccepted, r.status)
	stored, err = b.res.Jobs.Get(context.Background(), job.StoreKey("4", "reviewer-47", r.job(t).ID))
	require.NoError(t, err)
	require.Empty(t, stored.Trace, "no trace of its own when nothing traces")
}

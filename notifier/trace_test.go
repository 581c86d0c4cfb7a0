package notifier

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/tracing"
	"github.com/jobgate/jobgate/test/jobtest"
)

// The admission span of the traced jobs of these tests.
const admission = "00-7bf92f3577b34da6a3ce929d0e0e4736-30f067aa0ba902b7-01"

// recordSpans installs a global tracer provider recording every span for
// the test's length. Tests that call it are not parallel: the provider is
// global (the package's parallel tests run after them).
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })
	return rec
}

// spansNamed are the ended spans of the admission's trace called name.
func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	adm := tracing.SpanContext(admission, "")
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name && s.SpanContext().TraceID() == adm.TraceID() {
			out = append(out, s)
		}
	}
	return out
}

func attrsOf(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

type syncBuffer = jobtest.SyncBuffer

// Each webhook attempt is a client span of the job's trace, a child of its
// admission, naming the receiver's status and the attempt; the request
// carries that span's context as traceparent, so the receiver continues
// the job's trace; the delivery's log lines name the trace.
func TestWebhookDeliveryIsASpanOfTheJobsTraceSentAsTraceparent(t *testing.T) {
	rec := recordSpans(t)
	rcv := newReceiver(t, statuses(http.StatusInternalServerError, http.StatusNoContent))
	env := jobtest.Start(t)
	b := &testBundle{emb: env.Emb, res: env.Connect(t, "notifier-test").Res}
	var logs syncBuffer
	cfg := Config{
		Webhooks:     map[string][]Webhook{"4": {{URL: rcv.srv.URL + "/hooks/jobs?token=secret-in-url", Secret: testSecret}}},
		AllowPrivate: true,
		Retries:      []time.Duration{50 * time.Millisecond, time.Hour},
		StopGrace:    5 * time.Second, AckWait: 5 * time.Second,
	}
	n, err := New(cfg, storesOf(b.res), slog.New(tracing.LogHandler(slog.NewJSONHandler(&logs, nil))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Stop(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, n.Start(ctx))

	r := record("4", "reviewer-47", "job_traced_hook", job.StateSucceeded)
	r.Trace = admission
	b.publish(t, r)
	require.Eventually(t, func() bool { return n.Stats().Settled == 1 && len(spansNamed(rec, "webhook POST")) == 2 },
		waitTimeout, 10*time.Millisecond)

	adm := tracing.SpanContext(admission, "")
	spans := spansNamed(rec, "webhook POST")
	got := rcv.deliveries()
	require.Len(t, got, 2)
	for i, want := range []struct {
		status  int64
		outcome string
	}{{500, "retry"}, {204, "delivered"}} {
		s := spans[i]
		a := attrsOf(s)
		require.Equal(t, trace.SpanKindClient, s.SpanKind())
		require.Equal(t, adm.SpanID(), s.Parent().SpanID(), "a child of the job's admission")
		require.Equal(t, want.status, a["http.response.status_code"].AsInt64())
		require.Equal(t, want.outcome, a["jobgate.delivery.outcome"].AsString())
		require.Equal(t, int64(i+1), a["jobgate.delivery.attempt"].AsInt64())
		require.Equal(t, int64(2), a["jobgate.delivery.retries"].AsInt64())
		require.Equal(t, r.ID, a["jobgate.job.id"].AsString())
		require.Equal(t, r.Type, a["jobgate.job.type"].AsString())
		require.Equal(t, "4", a["jobgate.tenant"].AsString())
		for _, kv := range s.Attributes() {
			require.NotContains(t, kv.Value.Emit(), "secret-in-url", "never the URL's token")
			require.NotContains(t, kv.Value.Emit(), testSecret, "never the secret")
			require.NotContains(t, kv.Value.Emit(), "case_id", "never the body")
		}
		sent := tracing.SpanContext(got[i].header.Get("traceparent"), got[i].header.Get("tracestate"))
		require.Equal(t, adm.TraceID(), sent.TraceID(), "attempt %d: the receiver continues the job's trace", i+1)
		require.Equal(t, s.SpanContext().SpanID(), sent.SpanID(), "attempt %d: under the delivery's span", i+1)
	}
	require.Contains(t, attrsOf(spans[0]), attribute.Key("jobgate.delivery.retry_in_seconds"))

	// The retry's line names the job's trace and the attempt's span.
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "webhook delivery failed, will retry") {
			line = l
		}
	}
	require.Contains(t, line, `"trace_id":"`+adm.TraceID().String()+`"`)
	require.Contains(t, line, `"span_id":"`+spans[0].SpanContext().SpanID().String()+`"`)
}

// A mail is a span of the job's trace naming the SMTP server, never an
// address.
func TestMailIsASpanOfTheJobsTrace(t *testing.T) {
	rec := recordSpans(t)
	sink := jobtest.NewSMTPSink(t)
	_, b := setup(t, smtpConfig(sink, "mail"))
	r := record("4", "reviewer-47", "job_traced_mail", job.StateFailed)
	r.Trace = admission
	b.publish(t, r)
	require.Eventually(t, func() bool { return len(spansNamed(rec, "mail send")) == 1 }, waitTimeout, 10*time.Millisecond)
	s := spansNamed(rec, "mail send")[0]
	a := attrsOf(s)
	require.Equal(t, tracing.SpanContext(admission, "").SpanID(), s.Parent().SpanID())
	require.Equal(t, sink.Host, a["server.address"].AsString())
	require.Equal(t, int64(sink.Port), a["server.port"].AsInt64())
	require.Equal(t, "sent", a["jobgate.delivery.outcome"].AsString())
	require.Equal(t, r.ID, a["jobgate.job.id"].AsString())
	for _, kv := range s.Attributes() {
		require.NotContains(t, kv.Value.Emit(), "@", "never an address")
	}
}

// A batch's one notice is traced as its batch's admission.
func TestBatchNoticeIsTracedAsItsBatch(t *testing.T) {
	rec := recordSpans(t)
	rcv := newReceiver(t, statuses(http.StatusOK))
	sink := jobtest.NewSMTPSink(t)
	n, b := setup(t, batchConfig(rcv, sink, "batch"))
	tb := b.storeBatchWith(t, "bat_tttttttttttttttttttttttttt", 2, "", func(r *job.BatchRecord) { r.Trace = admission })
	tb.end(t, 0, job.StateSucceeded)
	tb.end(t, 1, job.StateFailed)
	quiet(t, b, 2, 2, n)
	got := rcv.deliveries()
	require.Len(t, got, 1)
	adm := tracing.SpanContext(admission, "")
	sent := tracing.SpanContext(got[0].header.Get("traceparent"), "")
	require.Equal(t, adm.TraceID(), sent.TraceID())
	require.Eventually(t, func() bool {
		return len(spansNamed(rec, "webhook POST")) == 1 && len(spansNamed(rec, "mail send")) == 1
	},
		waitTimeout, 10*time.Millisecond)
	hook := spansNamed(rec, "webhook POST")[0]
	require.Equal(t, sent.SpanID(), hook.SpanContext().SpanID())
	require.Equal(t, "batch", attrsOf(hook)["jobgate.notice.kind"].AsString())
	require.Equal(t, "bat_tttttttttttttttttttttttttt", attrsOf(hook)["jobgate.job.id"].AsString())
	require.Equal(t, adm.SpanID(), spansNamed(rec, "mail send")[0].Parent().SpanID())
}

package dispatcher

import (
	"context"
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

// The relay's publish is a span of the job's trace, a child of its
// admission, and the work it publishes carries the publish's context.
func TestRelayPublishIsAChildOfTheAdmission(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })

	env := jobtest.Start(t)
	b := &testBundle{env: env, conn: env.Connect(t, "test")}
	const admission = "00-5bf92f3577b34da6a3ce929d0e0e4736-10f067aa0ba902b7-01"
	adm := tracing.SpanContext(admission, "")
	// A gateway committed this job, with its admission's context, and died
	// before publishing its work.
	j := env.CommitAs(t, b.conn.Res, jobtest.Request{Key: "traced", Pages: 3}, func(r *job.Record) { r.Trace = admission })
	b.start(t, "dispatcher-a")

	var span sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == "relay publish" && s.SpanContext().TraceID() == adm.TraceID() {
				span = s
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, adm.SpanID(), span.Parent().SpanID())
	require.Equal(t, trace.SpanKindProducer, span.SpanKind())
	require.Contains(t, span.Attributes(), attrString("jobgate.job.id", j.ID))
}

func attrString(k, v string) attribute.KeyValue { return attribute.String(k, v) }

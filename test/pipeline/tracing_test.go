package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/jobgate/jobgate/internal/telemetry"
	"github.com/jobgate/jobgate/internal/tracing"
	"github.com/jobgate/jobgate/pkg/worker"
)

type echoParams struct {
	N int `json:"n" jsonschema:"minimum=1,maximum=10"`
}

// One job's trace through every component in process: the caller's span,
// the admission, the relay's publish, the attempt (claim to verdict, a
// child of the admission under the id its worker was handed), the worker's
// span of the handler, and the user's own span inside the handler.
func TestAJobsSpansNestFromTheCallerToTheHandler(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(telemetry.IDGenerator()))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })

	b := setup(t)
	base, tok := b.gateway(t)
	b.dispatcher(t, "dispatcher")
	b.startWorkers(t, "echo-worker", func(w *worker.Workers) {
		require.NoError(t, worker.Register(w, worker.Type[echoParams]{
			Name: "echo_traced", ContentType: "text/plain", Timeout: 30 * time.Second,
			Work: func(ctx context.Context, j *worker.Job[echoParams]) error {
				_, span := otel.Tracer("user").Start(ctx, "user step")
				defer span.End()
				_, err := fmt.Fprintf(j.Output(), "%d\n", j.Params.N)
				return err
			},
		}))
	})
	const caller = "00-6bf92f3577b34da6a3ce929d0e0e4736-20f067aa0ba902b7-01"
	csc := tracing.SpanContext(caller, "")
	var id string
	require.Eventually(t, func() bool {
		a := callTraced(t, base+"/v1/jobs", tok, "t-1", `{"type":"echo_traced","params":{"n":3}}`, caller)
		if a.status == http.StatusAccepted || a.status == http.StatusOK {
			id, _ = a.body["id"].(string)
		}
		return id != ""
	}, 10*time.Second, 50*time.Millisecond)

	byName := func(name string) sdktrace.ReadOnlySpan {
		for _, s := range rec.Ended() {
			if s.Name() == name && s.SpanContext().TraceID() == csc.TraceID() {
				return s
			}
		}
		return nil
	}
	// The worker's span of the handler ends once its verdict's answer is
	// back, which may be after the broker recorded the attempt.
	require.Eventually(t, func() bool {
		return byName("user step") != nil && byName("attempt echo_traced") != nil && byName("run echo_traced") != nil &&
			byName("result upload") != nil
	}, 20*time.Second, 50*time.Millisecond)
	adm := byName("POST /v1/jobs")
	require.NotNil(t, adm)
	require.Equal(t, csc.SpanID(), adm.Parent().SpanID())
	relay := byName("relay publish")
	if relay != nil { // the gateway's own publish may have won the race
		require.Equal(t, adm.SpanContext().SpanID(), relay.Parent().SpanID())
	}
	att := byName("attempt echo_traced")
	require.Equal(t, adm.SpanContext().SpanID(), att.Parent().SpanID(), "the attempt is a child of the admission")
	require.Contains(t, att.Attributes(), attrOf("jobgate.attempt.outcome", "succeeded"))
	require.Contains(t, att.Attributes(), attrOf("jobgate.worker", "echo-worker"))
	run := byName("run echo_traced")
	require.NotNil(t, run)
	require.Equal(t, att.SpanContext().SpanID(), run.Parent().SpanID(), "the worker's span is the attempt's child")
	user := byName("user step")
	require.Equal(t, run.SpanContext().SpanID(), user.Parent().SpanID(), "the user's span nests under the handler's ctx")
	require.Equal(t, trace.SpanKindConsumer, att.SpanKind())
	up := byName("result upload")
	require.NotNil(t, up, "the result's upload is a span of the job's trace")
	require.Equal(t, att.SpanContext().SpanID(), up.Parent().SpanID(), "the upload is the attempt's child")
	require.Contains(t, up.Attributes(), attrOf("jobgate.result.outcome", "stored"))
	require.Contains(t, up.Attributes(), attribute.Int64("jobgate.result.bytes", 2))
}

func attrOf(k, v string) attribute.KeyValue { return attribute.String(k, v) }

// callTraced is call with a traceparent.
func callTraced(t *testing.T, url, tok, key, body, parent string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", parent)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	_ = json.NewDecoder(resp.Body).Decode(&a.body)
	return a
}

package endpointcall_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobgate/jobgate/internal/telemetry"
	"github.com/jobgate/jobgate/internal/tracing"
	"github.com/jobgate/jobgate/pkg/endpoint"
)

// Each request is a client span in the job's trace, under the attempt's
// run span, naming the handler's status code and what jobgate made of it;
// the request's traceparent is that span's, so the handler's spans nest
// under it. A 503 then a 200: two spans, retry then succeeded, and the
// outcomes counted in jobgate_endpoint_outcomes_total.
func TestEachCallIsASpanWithTheHandlersAnswer(t *testing.T) {
	// Not parallel: it installs the global tracer provider (an SDK
	// recording every span) for as long as it runs.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(telemetry.IDGenerator()))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })

	d := start(t)
	var mu sync.Mutex
	var parents []string
	url := handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		parents = append(parents, r.Header.Get("traceparent"))
		n := len(parents)
		mu.Unlock()
		if n == 1 {
			endpoint.RetryLater(time.Second).Write(w)
			return
		}
		io.WriteString(w, "traced")
	}))
	d.declare(t, "traced", url+"/secret-path?token=hunter2", nil)
	const caller = "00-7bf92f3577b34da6a3ce929d0e0e4736-30f067aa0ba902b7-01"
	id := submitTraced(t, d, "traced", caller)
	require.Equal(t, "succeeded", d.until(t, id, 30*time.Second, terminal).State)

	// The job shows succeeded once the broker has recorded the verdict,
	// which the run span outlives: pkg/worker ends it when the report
	// returns. So the spans are read once both calls and the run spans
	// they name as parents have ended, each call under its own.
	traceID := tracing.SpanContext(caller, "").TraceID()
	var calls []sdktrace.ReadOnlySpan
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		calls = calls[:0]
		for _, s := range rec.Ended() {
			if s.Name() == "endpoint traced" && s.SpanContext().TraceID() == traceID {
				calls = append(calls, s)
			}
		}
		if !assert.Len(c, calls, 2) {
			return
		}
		for i, s := range calls {
			assert.Equal(c, "run traced", spanNamed(rec, s.Parent().SpanID()), "call %d: under the attempt's run span", i)
		}
		assert.NotEqual(c, calls[0].Parent().SpanID(), calls[1].Parent().SpanID(), "each attempt's run span its own")
	}, 10*time.Second, 20*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, parents, 2)
	for i, want := range []struct {
		status  int64
		outcome string
	}{{http.StatusServiceUnavailable, "retry"}, {http.StatusOK, "succeeded"}} {
		s := calls[i]
		require.Equal(t, trace.SpanKindClient, s.SpanKind())
		attrs := map[attribute.Key]attribute.Value{}
		for _, a := range s.Attributes() {
			attrs[a.Key] = a.Value
		}
		require.Equal(t, want.status, attrs["http.response.status_code"].AsInt64(), "span %d", i)
		require.Equal(t, want.outcome, attrs["jobgate.endpoint.outcome"].AsString(), "span %d", i)
		require.Equal(t, int64(i+1), attrs["jobgate.attempt"].AsInt64())
		require.Equal(t, id, attrs["jobgate.job.id"].AsString())
		require.NotContains(t, attrs["server.address"].AsString(), "secret-path", "the host only")
		require.Equal(t, tracing.SpanContext(parents[i], "").SpanID(), s.SpanContext().SpanID(),
			"the request carries the call span's context")
	}
	// The same outcomes are counted.
	resp, err := http.Get(d.url + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(metrics), `jobgate_endpoint_outcomes_total{outcome="retry",type="traced"} 1`)
	require.Contains(t, string(metrics), `jobgate_endpoint_outcomes_total{outcome="succeeded",type="traced"} 1`)
}

// spanNamed is the name of the ended span id, "" if none.
func spanNamed(rec *tracetest.SpanRecorder, id trace.SpanID) string {
	for _, s := range rec.Ended() {
		if s.SpanContext().SpanID() == id {
			return s.Name()
		}
	}
	return ""
}

// submitTraced admits a job of typ under the caller's traceparent.
func submitTraced(t *testing.T, d *deployment, typ, traceparent string) string {
	t.Helper()
	status, data, _ := d.do(t, d.user, http.MethodPost, "/v1/jobs", `{"type":"`+typ+`","params":{}}`,
		"Idempotency-Key", "traced-"+typ, "traceparent", traceparent)
	require.Equal(t, http.StatusAccepted, status, string(data))
	return jsonID(t, data)
}

func jsonID(t *testing.T, data []byte) string {
	t.Helper()
	var j struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(data, &j), string(data))
	return j.ID
}

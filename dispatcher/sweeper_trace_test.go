package dispatcher

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/tracing"
	"github.com/jobgate/jobgate/test/jobtest"
)

// lockedBuffer is a log sink the dispatcher's goroutines write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, `"msg":"`+msg+`"`) {
			out = append(out, line)
		}
	}
	return out
}

// The sweeper's recoveries are spans of the job's trace, children of its
// admission: a silent attempt's re-dispatch (whose work carries the
// sweep's context), a lost last attempt's failure, a job's expiry; and
// their log lines name the trace.
func TestSweeperRecoveriesAreSpansOfTheJobsTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })

	env := jobtest.Start(t)
	b := &testBundle{env: env, conn: env.Connect(t, "test")}
	var logs lockedBuffer
	cfg := testConfig()
	d, err := New(cfg, storesOf(env.Connect(t, "dispatcher-a").Res), slog.New(tracing.LogHandler(slog.NewJSONHandler(&logs, nil))))
	require.NoError(t, err)
	require.NoError(t, d.Start(context.Background()))
	t.Cleanup(func() { _ = d.Stop(context.Background()) })

	traces := map[string]string{
		"redispatch": "00-8bf92f3577b34da6a3ce929d0e0e4731-40f067aa0ba902b7-01",
		"fail":       "00-8bf92f3577b34da6a3ce929d0e0e4732-40f067aa0ba902b7-01",
		"expire":     "00-8bf92f3577b34da6a3ce929d0e0e4733-40f067aa0ba902b7-01",
	}
	lost := b.put(t, "traced-silent", func(r *job.Record) {
		running(1, "renderer-gone", time.Now().Add(-time.Hour))(r)
		r.Trace = traces["redispatch"]
	})
	last := b.put(t, "traced-last", func(r *job.Record) {
		running(3, "renderer-gone", time.Now().Add(-time.Hour))(r)
		r.Trace = traces["fail"]
	})
	old := b.put(t, "traced-old", func(r *job.Record) {
		r.CreatedAt = time.Now().Add(-719*time.Hour - 30*time.Minute).UTC()
		r.Trace = traces["expire"]
	})

	find := func(action string) sdktrace.ReadOnlySpan {
		tid := tracing.SpanContext(traces[action], "").TraceID()
		for _, s := range rec.Ended() {
			if s.Name() == "sweep "+action && s.SpanContext().TraceID() == tid {
				return s
			}
		}
		return nil
	}
	require.Eventually(t, func() bool { return find("redispatch") != nil && find("fail") != nil && find("expire") != nil },
		10*time.Second, 20*time.Millisecond)
	for action, j := range map[string]*job.Record{"redispatch": lost, "fail": last, "expire": old} {
		s := find(action)
		require.Equal(t, tracing.SpanContext(traces[action], "").SpanID(), s.Parent().SpanID(), "%s: a child of the admission", action)
		require.Contains(t, s.Attributes(), attrString("jobgate.job.id", j.ID))
		require.Contains(t, s.Attributes(), attrString("jobgate.sweeper.action", action))
	}
	require.Contains(t, find("redispatch").Attributes(), attrString("jobgate.attempt.outcome", job.OutcomeWorkerLost))
	require.Contains(t, find("redispatch").Attributes(), attrString("jobgate.error.category", string(job.CategoryWorkerLost)))
	require.Contains(t, find("fail").Attributes(), attrString("jobgate.attempt.outcome", job.OutcomeWorkerLost))
	require.Contains(t, find("expire").Attributes(), attrString("jobgate.error.category", string(job.CategoryExpired)))

	redispatch := find("redispatch")

	// Their log lines name the job's trace and the sweep's span.
	require.Eventually(t, func() bool { return len(logs.lines("job re-dispatched")) > 0 && len(logs.lines("job failed")) >= 2 },
		10*time.Second, 20*time.Millisecond)
	require.Contains(t, logs.lines("job re-dispatched")[0], `"trace_id":"`+redispatch.SpanContext().TraceID().String()+`"`)
	require.Contains(t, logs.lines("job re-dispatched")[0], `"span_id":"`+redispatch.SpanContext().SpanID().String()+`"`)
	for _, line := range logs.lines("job failed") {
		require.Contains(t, line, `"trace_id":"8bf92f3577b34da6a3ce929d0e0e473`)
	}
}

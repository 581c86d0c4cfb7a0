package tracing

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func TestLogLinesOfASpanCarryItsTraceAndSpanIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("job_id", "job_1")
	log.InfoContext(Extract(context.Background(), parent, ""), "job admitted")
	require.Contains(t, buf.String(), `"trace_id":"0af7651916cd43dd8448eb211c80319c"`)
	require.Contains(t, buf.String(), `"span_id":"b7ad6b7169203331"`)
	require.Contains(t, buf.String(), `"job_id":"job_1"`)
	buf.Reset()
	log.InfoContext(context.Background(), "no job")
	require.NotContains(t, buf.String(), "trace_id")
	require.Equal(t, LogHandler(log.Handler()), log.Handler(), "wrapped once")
}

func TestTraceContextRoundTripsThroughHeaders(t *testing.T) {
	ctx := Extract(context.Background(), parent, "vendor=x")
	p, s := Inject(ctx)
	require.Equal(t, parent, p)
	require.Equal(t, "vendor=x", s)
	h := http.Header{}
	SetHeader(context.Background(), h, p, s) // no span in ctx: the stored one
	require.Equal(t, parent, h.Get("traceparent"))
	p2, s2 := FromHeader(h)
	require.Equal(t, p, p2)
	require.Equal(t, s, s2)
	h = http.Header{}
	SetHeader(context.Background(), h, "", "")
	require.Empty(t, h, "nothing without a trace")
	require.False(t, SpanContext("garbage", "").IsValid())
}

func TestAttemptContextIsStableAndDistinctPerAttempt(t *testing.T) {
	a1 := AttemptContext(parent, "", "t.r.job_1", 1)
	require.True(t, a1.IsValid())
	require.True(t, a1.IsRemote())
	require.True(t, a1.IsSampled())
	require.Equal(t, a1, AttemptContext(parent, "", "t.r.job_1", 1), "every broker derives the same id")
	require.NotEqual(t, a1.SpanID(), AttemptContext(parent, "", "t.r.job_1", 2).SpanID())
	require.Equal(t, trace.SpanContext{}, AttemptContext("", "", "t.r.job_1", 1))
}

package telemetry

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/jobgate/jobgate/internal/tracing"
)

// clearOTEL unsets every variable Setup reads, for the test's duration.
func clearOTEL(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_EXPORTER_OTLP_HEADERS"} {
		t.Setenv(k, "")
	}
}

// resetGlobal puts OpenTelemetry's no-op provider back after the test.
func resetGlobal(t *testing.T) {
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
}

func TestSetupWithoutEnvironmentInstallsNothing(t *testing.T) {
	clearOTEL(t)
	resetGlobal(t)
	before := otel.GetTracerProvider()
	shutdown, err := Setup(t.Context(), "jobgate")
	require.NoError(t, err)
	require.Same(t, before, otel.GetTracerProvider(), "no provider without an endpoint")
	_, isSDK := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	require.False(t, isSDK)
	_, span := tracing.Tracer().Start(t.Context(), "x")
	require.False(t, span.IsRecording(), "spans are no-ops")
	span.End()
	require.NoError(t, shutdown(t.Context()))

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	require.False(t, Enabled(), "OTEL_TRACES_EXPORTER=none")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	require.False(t, Enabled(), "OTEL_SDK_DISABLED")
	t.Setenv("OTEL_SDK_DISABLED", "")
	require.True(t, Enabled())
}

// exported is what a fake OTLP receiver got: every span's name and the
// resources' service names, with their headers.
type exported struct {
	spans, services chan string
	headers         chan string
}

func newExported() *exported {
	return &exported{spans: make(chan string, 100), services: make(chan string, 100), headers: make(chan string, 100)}
}

func (e *exported) take(req *coltrace.ExportTraceServiceRequest) {
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				e.services <- a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				e.spans <- s.GetName()
			}
		}
	}
}

func recv(t *testing.T, ch chan string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing exported")
		return ""
	}
}

func TestSetupExportsOverHTTPFromTheStandardVariables(t *testing.T) {
	clearOTEL(t)
	resetGlobal(t)
	got := newExported()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		got.headers <- r.Header.Get("X-Tenant-Token")
		got.take(&req)
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant-token=abc")
	t.Setenv("OTEL_SERVICE_NAME", "gw-7")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	shutdown, err := Setup(t.Context(), "jobgate")
	require.NoError(t, err)
	_, span := tracing.Tracer().Start(t.Context(), "admission")
	span.End()
	require.NoError(t, shutdown(t.Context()), "shutdown flushes the batch")
	require.Equal(t, "admission", recv(t, got.spans))
	require.Equal(t, "gw-7", recv(t, got.services), "OTEL_SERVICE_NAME wins over the default")
	require.Equal(t, "abc", recv(t, got.headers), "OTEL_EXPORTER_OTLP_HEADERS")
}

type grpcTraces struct {
	coltrace.UnimplementedTraceServiceServer
	got *exported
}

func (g grpcTraces) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	g.got.take(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func TestSetupExportsOverGRPCAndKeepsTheDefaultServiceName(t *testing.T) {
	clearOTEL(t)
	resetGlobal(t)
	got := newExported()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, grpcTraces{got: got})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+lis.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	shutdown, err := Setup(t.Context(), "jobgate-notifier")
	require.NoError(t, err)
	_, span := tracing.Tracer().Start(t.Context(), "webhook")
	span.End()
	require.NoError(t, shutdown(t.Context()))
	require.Equal(t, "webhook", recv(t, got.spans))
	require.Equal(t, "jobgate-notifier", recv(t, got.services))
}

func TestAttemptSpanGetsTheIDItsWorkerWasHanded(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(idGenerator{}))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	parent := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	want := tracing.AttemptContext(parent, "", "t.r.job_1", 2)
	require.True(t, want.IsValid())
	ctx := tracing.WithSpanID(tracing.Extract(t.Context(), parent, ""), want.SpanID())
	_, span := tp.Tracer("t").Start(ctx, "attempt")
	defer span.End()
	sc := span.SpanContext()
	require.Equal(t, want.TraceID(), sc.TraceID())
	require.Equal(t, want.SpanID(), sc.SpanID())
	// Without the request, ids are random and valid.
	_, other := tp.Tracer("t").Start(t.Context(), "other")
	defer other.End()
	require.True(t, other.SpanContext().IsValid())
	require.NotEqual(t, want.SpanID(), other.SpanContext().SpanID())
	require.NotEqual(t, trace.TraceID{}, other.SpanContext().TraceID())
}

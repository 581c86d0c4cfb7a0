package telemetry

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobgate/jobgate/internal/tracing"
)

// Enabled reports whether the environment asks for traces to be exported.
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if e := os.Getenv("OTEL_TRACES_EXPORTER"); e != "" && !strings.EqualFold(e, "otlp") {
		return false // "none" (or an exporter jobgate does not ship)
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs the global tracer provider and propagator a process's
// spans go through, configured by the OTEL_* variables: the endpoint,
// headers, timeout and TLS settings are read by the OTLP exporter itself,
// the protocol from OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL ("http/protobuf", the default, or "grpc"),
// the sampler by the SDK (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG),
// the resource from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
// (service.name defaulting to defaultService). The propagator (W3C trace
// context) is installed in every case, so a caller's traceparent is kept
// with its job even where this process exports nothing.
//
// shutdown flushes the spans still buffered and stops the exporter; it is
// a no-op when nothing was installed.
func Setup(ctx context.Context, defaultService string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(Propagator)
	if !Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	var exp sdktrace.SpanExporter
	switch proto := protocol(); proto {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "http/protobuf", "":
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: jobgate exports traces over grpc or http/protobuf", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName(defaultService)),
		// WithFromEnv reads OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME,
		// which win over the default name.
		mustResource(resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK())),
	)
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(idGenerator{}),
		// No WithSampler: the SDK's default reads OTEL_TRACES_SAMPLER.
	)
	otel.SetTracerProvider(tp)
	return func(ctx context.Context) error {
		return errors.Join(tp.ForceFlush(ctx), tp.Shutdown(ctx))
	}, nil
}

func mustResource(r *resource.Resource, err error) *resource.Resource {
	if r == nil {
		return resource.Empty()
	}
	_ = err // a partial resource (an unparsable attribute) is still used
	return r
}

func protocol() string {
	if p := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p != "" {
		return p
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
}

// Propagator is the one propagation format jobgate reads and writes: W3C
// Trace Context (traceparent, tracestate).
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// idGenerator is the SDK's random ids, except for a span whose context
// asks for its id (tracing.WithSpanID: an attempt span, whose id its
// worker was handed at the claim).
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, idGenerator{}.NewSpanID(ctx, tid)
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if id, ok := tracing.SpanIDFrom(ctx); ok {
		return id
	}
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

// IDGenerator is the ID generator Setup installs (random ids, but the
// attempt spans' derived ones), for tests that build their own provider.
func IDGenerator() sdktrace.IDGenerator { return idGenerator{} }

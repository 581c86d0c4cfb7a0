// Package telemetry installs OpenTelemetry's SDK in a jobgate process:
// Setup builds the tracer provider from the standard OTEL_* variables (the
// OTLP exporter over http/protobuf or grpc, the SDK's sampler, the
// resource with service.name), installs it and the W3C trace-context
// Propagator globally, and returns the shutdown that flushes what is
// buffered. Its ID generator gives an attempt's span the id its worker was
// handed at the claim (internal/tracing's WithSpanID); IDGenerator lends it
// to tests that build their own provider.
//
// With no OTLP endpoint set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), or with OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none, Setup installs only the propagator: the
// global tracer provider stays OpenTelemetry's no-op, and spans cost a
// context lookup.
//
// Only system (for every process it assembles) and tests import
// it. What the components share of the API — the tracer, the job's trace
// context as it is stored and carried, the attempt span's identity, the
// log handler that stamps trace_id and span_id — is internal/tracing, which
// links no SDK.
package telemetry

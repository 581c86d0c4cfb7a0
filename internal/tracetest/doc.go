// Package tracetest proves jobgate's tracing against a real backend: it
// runs `jobgate serve` as a process exporting OTLP to a real OpenTelemetry
// Collector (tools/otelcol, built into bin/tools/otelcol by
// scripts/ensure-otelcol.sh), submits a job under a caller's traceparent
// and reads the exported spans back from the Collector's file, where the
// admission, the relay's publish, the attempt, the worker's handler, the
// result upload and the webhook delivery must form one trace, the
// caller's, in their parent/child order; the test's webhook receiver must
// see that trace in the delivery's traceparent. In-process tests
// (internal/pipeline) check the span tree against the SDK; only this one
// checks what leaves the process. A missing collector skips the test with
// a message, except under CI=true, where it fails. The package has no
// code besides the test.
package tracetest

// Package tracetest proves jobgate's tracing against a real backend: it
// runs jobgate as processes exporting OTLP to a real OpenTelemetry
// Collector (tools/otelcol, built into bin/tools/otelcol by
// scripts/ensure-otelcol.sh), submits a job under a caller's traceparent
// and reads the exported spans back from the Collector's file, where the
// admission, the relay's publish, the attempt, the worker's handler, the
// result upload and the webhook delivery must form one trace, the
// caller's, in their parent/child order; the test's webhook receiver must
// see that trace in the delivery's traceparent.
// TestAJobsTraceReachesARealCollector runs `jobgate serve`;
// TestAJobsTraceCrossesProcesses runs gateway, dispatcher, renderer and
// notifier as four processes on one nats-server (built from the version
// go.mod pins), each under its own OTEL_SERVICE_NAME, so every link of
// the tree crosses a process and each span must name the process that
// made it. In-process tests (test/pipeline) check the span tree
// against the SDK; only these check what leaves the processes. A missing
// collector skips the tests with a message, except under CI=true, where
// they fail. The package has no code besides the tests.
package tracetest

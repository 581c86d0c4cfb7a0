#!/usr/bin/env bash
# The end-to-end tracing test (test/tracetest) reads jobgate's spans
# back from a real OpenTelemetry Collector: tools/otelcol, a module of its
# own (the OTLP receiver and the file exporter, nothing else), so jobgate's
# go.mod stays free of it. Build it into bin/tools/otelcol, and again only
# when tools/otelcol's go.mod, go.sum or main.go changed (the stamp beside
# the binary holds their hash): a cold build takes a few minutes, a warm
# one seconds. Without the binary the test skips with a message, or fails
# under CI=true. JOBGATE_SKIP_OTELCOL=1 skips this step.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${JOBGATE_SKIP_OTELCOL:-}" = 1 ]; then
  exit 0
fi

out=bin/tools/otelcol
stamp="$out.sha256"
want="$(cd tools/otelcol && sha256sum go.mod go.sum main.go | sha256sum | cut -d' ' -f1)"
if [ -x "$out" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "building the OpenTelemetry Collector for the tracing test into $out (tools/otelcol; minutes the first time)" >&2
mkdir -p bin/tools
# Built beside the old binary and moved into place, so an interrupted
# build never leaves a broken one behind the stamp.
(cd tools/otelcol && go build -o "../../$out.new" .)
mv "$out.new" "$out"
echo "$want" >"$stamp"

// Package interop runs clients nobody on this project wrote against a
// running jobgate (the whole system in-process on an embedded JetStream):
// the official Standard Webhooks library verifies every webhook delivery,
// the npm eventsource package follows a job's event stream to its end and
// stops, Redocly lints the OpenAPI document and promtool checks /metrics.
// The Node.js clients are pinned in node/package-lock.json and installed by
// scripts/ensure-interop.sh (make test). A missing runtime skips its test
// with a message, except under CI=true, where it fails.
//
// TestTypeScriptSDK runs the TypeScript worker package's own suite
// (sdk/typescript, node's test runner) against `jobgate serve` processes of
// the binary it builds, and the package as `npm pack` makes it installed
// into a new project. Its runtime missing, it fails as the conformance
// suite's TypeScript half does, unless JOBGATE_SKIP_INTEROP=1 (and CI is
// not true).
package interop

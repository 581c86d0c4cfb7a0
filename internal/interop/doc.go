// Package interop runs clients nobody on this project wrote against a
// running jobgate (the whole system in-process on an embedded JetStream):
// the official Standard Webhooks library verifies every webhook delivery,
// the npm eventsource package follows a job's event stream to its end and
// stops, Redocly lints the OpenAPI document and promtool checks /metrics.
// The Node.js clients are pinned in node/package-lock.json and installed by
// scripts/ensure-interop.sh (make test). A missing runtime skips its test
// with a message, except under CI=true, where it fails.
package interop

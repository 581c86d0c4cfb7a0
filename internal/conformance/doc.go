// Package conformance proves the worker protocol (docs/protocol.md) is a
// specification: its tests start a real `jobgate serve`, mint per-type
// worker credentials with `jobgate nats-user --worker`, and drive two
// independent implementations of the protocol through the same scenarios
// over HTTP, as a user would: a Go worker on pkg/worker (goworker/) and a
// TypeScript worker on sdk/typescript (sdk/typescript/test/). Endpoint
// types get the same treatment (endpoint*.go): jobgate calls handler
// processes in Python and Node (handlers/, standard library only) through
// the endpoint scenarios, dispatcher_killed in a deployment whose three
// dispatchers are processes of their own, killed with SIGKILL.
//
// The TypeScript half needs node (18.17 or later; it is run on 20) and the npm packages pinned
// in sdk/typescript/package-lock.json (scripts/ensure-interop.sh installs
// them). Without them it fails, unless JOBGATE_SKIP_INTEROP=1 says to skip
// it; under CI=true it never skips. The endpoint handlers need python3
// (3.9 or later) and node, under the same rule.
package conformance

// Package archtest holds no code, only a test that keeps the layout honest:
// the services (gateway, dispatcher, renderer, notifier) import no NATS
// client themselves (they use internal/natsjs, the renderer pkg/worker) and
// never import each other, pkg/job depends on the standard library alone,
// pkg/client pulls in neither NATS nor the server's HTTP stack, pkg/worker
// links neither the NATS server nor JetStream, and nothing public depends
// on test helpers or the load generator. It reads the import graph with
// `go list -json`.
package archtest

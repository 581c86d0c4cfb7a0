// Package archtest holds no code, only a test that keeps the layout honest:
// the services (gateway, dispatcher, renderer, notifier) reach NATS only
// through internal/natsjs and never import each other, pkg/job depends on
// the standard library alone, and nothing public depends on test helpers or
// the load generator. It reads the import graph with `go list -json`.
package archtest

// Package archtest holds no code, only tests that keep the layout honest:
// only cmd/, the harnesses under test/ and pkg/workertest/jobgatetest import
// system, the one assembly; nothing outside test/ imports a harness; every
// package under internal/ is linked by the binary or a public package; the
// services (gateway, dispatcher, renderer, notifier) import no NATS
// client themselves (they use internal/natsjs, the renderer pkg/worker),
// never import each other, and with internal/broker never name
// natsjs.Resources (each takes the Stores it declares, which
// system maps the provisioned resources to); pkg/api depends on
// the standard library alone; pkg/client, pkg/worker, pkg/endpoint and
// pkg/workertest link only pkg/api and a few hidden internal leaves (never
// the record, a store or a service), pkg/client pulls in neither NATS nor
// the server's HTTP stack, pkg/worker links neither the NATS server nor
// JetStream, pkg/workertest (a handler's unit test) links no NATS server,
// Fiber, bbolt or go-mail, which only pkg/workertest/jobgatetest's whole
// jobgate needs; internal/natsjs, the JetStream adapters, links no NATS
// server (internal/natsserver holds it); internal/job, the domain, links
// no codec (internal/codec), no HTTP and no service; no exported name of a public
// package mentions an internal type; nothing public depends on test
// helpers or the load generator; and whatever has Start(ctx) has
// Stop(ctx context.Context) error. It reads the import graph with `go list
// -json` and the services' and public packages' declarations with
// go/parser.
package archtest

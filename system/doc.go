// Package system is jobgate assembled: the one place that builds the
// deployment the way `jobgate serve` runs it, from one Config whose zero
// value is what serve runs with given no settings (internal/config's
// Default; each default is named there once).
//
// Start takes, in this order, everything a process must own before it
// changes anything: the data dir's lock (embedded server only; a second
// process on the same data dir fails here, naming the lock) and the
// gateway's listen address, or in a process without the gateway its ops
// address (Settings.OpsAddr; a taken port fails here). Then it loads the
// token secret (generated into the data dir on first use with the embedded
// server), starts the embedded NATS server with JetStream (or connects to
// the external one in Settings.NATS.URL), provisions the streams and
// buckets (a process that runs only workers binds to them instead: worker
// credentials may create nothing), and starts the components, each on a
// NATS connection of its own when the process runs more than one. Each
// component takes the adapters it declares (its package's Stores), never
// the provisioned natsjs.Resources whole; stores.go is the one mapping from
// the one to the others (GatewayStores, DispatcherStores, ...), which the
// harnesses that build a component by hand use too:
//
//  1. notifier: webhooks and mail for the events the others publish;
//  2. dispatcher: the relay, the sweeper and the broker that
//     answers every worker's requests (docs/protocol.md), so it runs before
//     any worker asks;
//  3. workers: the renderer (permit_report) and Config.Workers;
//  4. gateway: the HTTP API, last, once everything it hands work to runs.
//
// A process without the gateway then serves /healthz, /readyz and /metrics
// on its ops address (ops.go), for an orchestrator's probes and a scraper;
// it stops first.
//
// Stop (on SIGTERM in cmd/jobgate) stops them in the reverse order: the
// gateway drains its requests first, so no new work is admitted; then the
// workers let their running jobs finish or give them back, which needs the
// dispatcher's broker still answering; then the dispatcher, which relays
// the last changes and their events; then the notifier, which delivers
// what was published until then. Each stage gets a share of Stop's
// deadline (cmd/jobgate gives StopTimeout) and is cut off past it. Last,
// it closes the NATS connections, shuts the embedded server down and drops
// the data dir's lock. Every component follows internal/startstop: its
// Start's context bounds only its start-up, so the end of the context a
// process started with (SIGTERM) stops nothing until Stop runs.
//
// cmd/jobgate (serve, each component command, the bench's target) and the
// cross-component test harnesses (test/e2e, test/interop,
// pkg/client's tests, pkg/workertest/jobgatetest and so the examples'
// tests) build through Start, so a test runs the admission path, the
// components and their order that serve runs.
package system

// Package chaos is jobgate's randomized fault test. It runs every component
// as its own OS process of the real binary (2 gateways, 2 renderers, 2
// dispatchers, whose brokers race for claims, and 2 notifiers, which race
// on every event) on a real three-node nats-server cluster with
// R3 resources, drives it with clients that submit jobs and batches of jobs
// with idempotency keys and retry through either gateway (some scheduled a
// few seconds ahead, some of a flow-limited type the harness's own worker
// runs: one job per customer at once, a rate limit), and lets a seeded nemesis SIGKILL or
// SIGSTOP/SIGCONT any process, one NATS node at a time so a quorum stays.
// With Options.Partitions (make chaos-partitions, root) each NATS node runs
// in a network namespace of its own (package netns) with the processes
// spread over them, and the nemesis also partitions a node, isolates the
// job records' leader, cuts two nodes apart, and plays back a node's power
// loss by dropping what its store wrote since a moment within the last
// sync interval (powerloss.go).
// Everything the clients, the nemesis and the webhook and mail sinks see is
// written to a history file (JSON lines), followed by the final state read
// from the gateways and from JetStream directly; Check reads that file and
// reports every broken promise as an anomaly, with the seed to replay the
// fault and request schedule, including calls that no order respecting real
// time can explain on a key→job register (Porcupine, linearize.go).
// `make chaos` runs it for minutes
// (cmd/chaos); TestChaosShort runs a short seeded round inside `make test`.
package chaos

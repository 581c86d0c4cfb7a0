// Package bench is the load generator and report of `jobgate bench`: it
// starts the system under test as a second process (the same binary, in a
// hidden target mode that wires the services exactly like `serve`), drives it
// over HTTP and a small control channel, measures throughput, latency, CPU
// and memory of both processes, and writes one table and bench.json. The
// target side (raw JetStream floor, a change driver standing in for a
// renderer, memory probes) runs inside the measured process, so the floor is
// taken against the very server and connection the gateway uses. Peers are
// measured in the same run where a section compares with them: the
// endpoints section's no-op HTTP handler runs in this process, and the
// nethttp section starts a redis-server and tools/asynqbench (Asynq) beside
// the target.
package bench

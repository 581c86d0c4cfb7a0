// Package wire is version 1 of the worker protocol (docs/protocol.md): the
// subjects a worker process speaks on and the messages it sends and gets
// back. It is shared by jobgate's side (internal/broker) and the Go worker
// (pkg/worker) and depends on the standard library only, so that the
// worker a user builds links neither nats-server nor jobgate's internals.
package wire

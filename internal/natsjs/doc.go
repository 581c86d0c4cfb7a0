// Package natsjs is the adapter of jobgate to NATS JetStream, named after its
// dependency: the only package of the services' side that imports nats.go.
// It knows the layout (stream, bucket and subject names), provisions it,
// starts an embedded server, and hands out typed handles with methods: the
// job record Store (with its change watch and change log), the WorkQueue,
// the EventStream (with the notifiers' consumer), the ResultFiles, the
// Secrets and the Notices. Their errors are the domain's (job.ErrNotFound,
// job.ErrUnavailable, job.ErrResultExpired) and this package's (ErrExists,
// ErrStale, ErrWorkGone): JetStream's errors are mapped here and nowhere
// else. The services (gateway, dispatcher, notifier) declare the small
// interfaces they consume and never import NATS; internal/archtest checks it.
package natsjs

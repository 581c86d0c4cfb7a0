// Package natsjs is jobgate's adapter to NATS JetStream, a NATS client
// only: the gateway, the dispatcher and the notifier reach JetStream only
// through it (the renderer, a worker, speaks core NATS through pkg/worker),
// and it links no NATS server (the embedded server and who may log in to
// it are internal/natsserver's; test/archtest checks). It names the
// layout (streams, buckets, subjects and consumers; nothing outside spells
// them), provisions it with the configured replicas or binds to it,
// refusing resources whose settings differ (Layout, Provision, Bind,
// MismatchError), and connects to an external NATS deployment (Connect).
// Its typed handles (Resources) are the job record Store (create-only
// commits, compare-and-set writes, the record watch, and the change log
// through the relay's consumer and from a position, for the gateways' query
// indexes), the WorkQueue and its per-type WorkLanes, which the broker
// schedules from by direct gets with no work consumer at all, the
// EventStream (in-order publishes under Nats-Msg-Id <job_id>.<revision>,
// and the notifiers' per-tenant consumers), the notifier's Deliveries queue
// and Notices bucket, the BatchStore, the Schedule (the scheduled set:
// an entry per job with a run_at ahead, on a subject per minute, read by
// direct get; nothing of it held in memory), the TypeStore of declarations (each
// owned by the credential that declared it first) and of live worker
// presence, the SlotStore (endpoint types' request slots, the types'
// concurrency places and rate buckets, leased by compare-and-set with a
// TTL), the ResultFiles object store and the deployment Secrets. Their errors are
// the domain's (job.ErrNotFound, job.ErrUnavailable, job.ErrResultExpired)
// and this package's (ErrExists, ErrStale, ErrWorkGone, ErrOwned,
// ErrLayoutMismatch): JetStream's errors are mapped here and nowhere else,
// and the services declare the small interfaces they consume and take them
// as a Stores of their own, which system maps Resources to
// (test/archtest checks they import no NATS client and name no
// Resources).
package natsjs

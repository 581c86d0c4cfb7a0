// Package notifier tells people that their jobs changed: it consumes the
// JOBGATE_EVENTS stream through one durable consumer per tenant with a
// destination ("notifier_<tenant>", shared by any number of notifier
// processes, so one tenant's burst of events is never queued ahead of
// another's) and turns each event into signed webhook deliveries and, for
// terminal states, one mail to the requester.
//
// Notices are isolated per destination. The event consumer only routes:
// for each destination that wants an event (each of the tenant's webhook
// endpoints, and the tenant's mail for a terminal state) it queues a
// delivery task on JOBGATE_DELIVERIES (subject
// jobgate.deliveries.<destination>.<job>, message id
// <destination>.<event id>, so a redelivered event queues nothing twice)
// and acknowledges the event at once. Every destination has a durable
// consumer of its own, worked by DestinationConcurrency workers per
// instance; a delivery waiting for its next attempt is a delayed Nak on its
// destination's consumer. A failing, slow or paused (Retry-After) endpoint,
// or a slow mail server, therefore delays its own deliveries and nobody
// else's. A destination holds at most MaxPendingPerDestination tasks; past
// that new notices for it are dropped, counted (jobgate_deliveries_total
// {outcome="dropped"}) and logged, never queued without bound.
//
// One endpoint receives one job's changes in revision order: a task whose
// job has an earlier change still pending at the same destination waits
// (Nak) until that one is due or done. The payload carries "revision" so
// receivers can order what they get from several endpoints, or after a
// crash: a writer that died before publishing an event has it published
// later by the relay, after the changes that followed it.
//
// Delivery guarantees differ per channel, on purpose:
//
//   - Webhooks are at-least-once. A delivery is marked done in the NOTICES
//     bucket only after the receiver answered 2xx, so a crash in between
//     repeats it. Receivers dedupe by the webhook-id header, which is the
//     event's Nats-Msg-Id (<job_id>.<revision>) and so is stable across
//     retries, redeliveries and notifier instances.
//   - Mail is at-most-once. Before talking to the mail server the notifier
//     claims the key mail.<tenant>.<requester>.<job>.<state> create-only in
//     the NOTICES bucket; of any number of redeliveries, duplicate events or
//     racing instances exactly one wins and sends. A failure that provably
//     happened before the server accepted the message (dial error, MAIL/RCPT/
//     DATA refused, connection lost while writing the body) releases the claim
//     so a later attempt may send; a crash, or a lost reply after the final
//     "." leaves the claim in place, and the mail is counted as uncertain
//     rather than risked twice. A person gets one mail or, rarely, none, never
//     two; the job stays readable over HTTP either way.
//
// Per-delivery attempt counts and due times live in the NOTICES bucket, so
// the schedule (exponential backoff with jitter, stretched by a receiver's
// Retry-After) survives restarts and holds across instances. After the last
// attempt the failure is logged and counted (Stats) and the task is
// acknowledged. A 410 Gone disables the endpoint for every instance (key
// whoff.<endpoint>), until its URL changes or the marker expires with the
// bucket's TTL.
//
// Webhook URLs that resolve to loopback, private, link-local or otherwise
// non-public addresses are refused unless AllowPrivate is set. The check runs
// on the address actually dialed, so DNS changes after start-up and redirects
// cannot get around it (redirects are not followed at all).
//
// Without an SMTP host, mails are written as .eml files into the outbox
// directory, so a default `jobgate serve` needs no mail server.
package notifier

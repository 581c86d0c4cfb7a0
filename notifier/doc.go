// Package notifier tells people that their jobs changed: it is a durable
// consumer ("notifier") on the JOBGATE_EVENTS stream, shared by any number
// of notifier processes, that turns each event into signed webhook
// deliveries and, for terminal states, one mail to the requester.
//
// Delivery guarantees differ per channel, on purpose:
//
//   - Webhooks are at-least-once. A delivery is marked done in the NOTICES
//     bucket only after the receiver answered 2xx, so a crash in between
//     repeats it. Receivers dedupe by the webhook-id header, which is the
//     event's Nats-Msg-Id (<job_id>.<state>.<attempt>) and so is stable across
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
// Retries never block other work: a failed delivery leaves the event
// un-acknowledged and asks JetStream to redeliver it later (Nak with delay),
// so the consumer goes on with the next events meanwhile. Per-endpoint
// attempt counts and due times live in the NOTICES bucket, so the schedule
// (exponential backoff with jitter, stretched by a receiver's Retry-After)
// survives restarts and holds across instances. After the last attempt the
// failure is logged and counted (Stats) and the event is acknowledged. A 410
// Gone disables the endpoint for every instance (key whoff.<endpoint>), until
// its URL changes or the marker expires with the bucket's TTL.
//
// Webhook URLs that resolve to loopback, private, link-local or otherwise
// non-public addresses are refused unless AllowPrivate is set. The check runs
// on the address actually dialed, so DNS changes after start-up and redirects
// cannot get around it (redirects are not followed at all).
//
// Without an SMTP host, mails are written as .eml files into the outbox
// directory, so a default `jobgate serve` needs no mail server.
package notifier

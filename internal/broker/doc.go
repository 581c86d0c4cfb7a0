// Package broker is jobgate's side of the worker protocol (internal/wire,
// docs/protocol.md). Worker processes are untrusted: their credentials
// reach only request subjects under their own types, and everything they
// ask for (declare a type, take the next job, beat, upload a result,
// succeed, fail, give back) is a request that the broker checks against
// the type's owner, the job's state rules, its current claim (a fencing
// token) and the type's limits before it writes anything. The broker
// schedules work fairly between tenants and requesters on jobgate's side
// (a requester's jobs by priority), holds each start to its type's flow
// control (concurrency places and rate tokens leased in JOBGATE_SLOTS,
// flow.go; jobs held back parked per key, park.go; retries spaced by the
// type's policy with full jitter),
// builds every event from the record it stored, and stores results under
// the content type the type declared. The dispatcher runs it; any number
// may run at once (a queue group), each request handled by one, every
// write a compare-and-set on the record.
package broker

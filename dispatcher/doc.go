// Package dispatcher keeps every admitted job moving and answers the worker
// processes. Its relay follows the job record change log through the
// durable consumer "relay", shared by any number of dispatchers and handled
// in lanes keyed by job: for a queued record it stores the admission's
// event as the job's first event and publishes the job's work message (the
// gateway only commits the record, so a gateway that died after its
// commit needs nothing more), and two seconds after a terminal change it
// stores that change's event if the writer died before it could. Its
// sweeper, a backstop, keeps the open
// jobs in memory from a watch of the record bucket: a running job silent
// for longer than its attempt timeout plus Grace is re-dispatched while
// attempts remain and failed with its last attempt's cause (worker_lost
// when the worker vanished) after, and a job long queued whose work
// message is gone gets a new one; no job is failed for waiting, short of
// its retention: one still open ExpireMargin before CreatedAt+JobTTL fails
// expired, by a write that renews its record. And it
// runs the broker of internal/broker, which answers every worker's
// requests in a queue group, schedules each type's work fairly between
// tenants and requesters, and checks and writes every claim, beat, result
// and verdict. Every recovery is a compare-and-set on the job record, so
// any number of dispatchers may run at once.
package dispatcher

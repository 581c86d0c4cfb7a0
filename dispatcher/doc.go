// Package dispatcher keeps every admitted job moving and answers the worker
// processes. Its relay follows the job record change log through the
// durable consumer "relay", shared by any number of dispatchers and handled
// in lanes keyed by job: for a queued record it stores the admission's
// event as the job's first event and publishes the job's work message (the
// gateway only commits the record, so a gateway that died after its
// commit needs nothing more); for a scheduled record (a run_at ahead) it
// stores the admission's event and the job's entry in the scheduled set;
// and two seconds after a terminal change it stores that change's event if
// the writer died before it could. Its waker (schedule.go) reads the
// scheduled set every ScheduleTick and moves each job whose run_at has
// come to queued, or canceled deadline_exceeded past its start_by, by
// compare-and-set (and writes again the record of a wait longer than half
// the retention, every half retention, so that the bucket keeps it); the set is stored, so a restart loses no scheduled job
// and wakes none early. Its
// sweeper, a backstop, keeps the open
// jobs in memory from a watch of the record bucket: a running job silent
// for longer than its attempt timeout plus Grace is re-dispatched while
// attempts remain and failed with its last attempt's cause (worker_lost
// when the worker vanished) after, a job long queued whose work
// message is gone gets a new one, and a queued job past its start_by is
// canceled deadline_exceeded (scheduled jobs are not kept: they cost the
// sweeper nothing until queued); no job is failed for waiting, short of
// its retention: one still open ExpireMargin before JobTTL after its
// admission (its run_at, when later) fails
// expired, by a write that renews its record. And it
// runs the broker of internal/broker, which answers every worker's
// requests in a queue group, schedules each type's work fairly between
// tenants and requesters, and checks and writes every claim, beat, result
// and verdict. Every recovery is a compare-and-set on the job record, so
// any number of dispatchers may run at once.
package dispatcher

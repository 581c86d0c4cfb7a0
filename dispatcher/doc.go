// Package dispatcher keeps every admitted job moving. Its relay follows the
// job record change log through a durable consumer shared by any number of
// dispatchers: it publishes the work of queued jobs whose admission never
// reached the queue and the event of every state change. Its sweeper keeps
// the running jobs in memory from a watch of the record bucket and recovers
// those whose worker went silent past the render budget: re-dispatched while
// attempts remain, failed worker_lost after. Its exhaustion handler fails a
// job whose work message ran out of deliveries. Between them no job stays
// queued or running forever.
package dispatcher

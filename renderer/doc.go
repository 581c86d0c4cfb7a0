// Package renderer is jobgate's own worker: it declares the built-in job
// type permit_report with the public worker package (pkg/worker), exactly
// as a user's worker declares its types, but under jobgate's own credential
// (so no worker credential can declare the name), and renders each job as
// a real PDF of exactly the pages asked for, within the page budget, the
// declared result size and the attempt timeout, reporting progress after
// every page; the bytes are a pure function of the params and the job's
// creation time, so a re-render after a crash stores the same file. It has
// no durable consumer, shared or otherwise, and touches no stream or
// bucket: its handler slots ask jobgate's broker (internal/broker, run by
// the dispatcher) for their next job, and the broker schedules
// permit_report work fairly between tenants and requesters, claims it, and
// checks and stores every beat, progress step, result upload and verdict.
// A permanent failure (budget_exceeded, render_error) fails the job at
// once, any other error is retried while attempts remain, and Stop lets
// running renders finish for the drain time before it gives their jobs
// back. Any number of renderers may run, in any number of processes.
package renderer

// Package renderer is jobgate's worker: any number of renderer processes
// share one durable pull consumer on the work queue, claim a job by
// compare-and-set on its record, render it (permit reports as real PDFs)
// within a time, page and size budget, keep the claim alive with heartbeats
// and progress checkpoints, store the result object and finish the job
// exactly once. Retryable failures go back to the queue with a delay while
// attempts remain; permanent ones fail the job at once.
package renderer

package worker

import (
	"io"
	"log/slog"
	"time"
)

// Job is one attempt's view of a job: who asked, the typed params, and the
// means to report progress and write the result.
type Job[T any] struct {
	ID        string
	Type      string
	Tenant    string
	Requester string
	// Attempt is this attempt's number, from 1; Attempts is how many the
	// job gets.
	Attempt, Attempts int
	// CreatedAt is when the job was admitted (a stable date for outputs
	// that must be the same on every attempt).
	CreatedAt time.Time
	// Params are the job's params, validated against the type's schema
	// and with its defaults applied.
	Params T

	a *attempt
}

// Progress reports how far the attempt is (done of total, in unit such as
// "pages" or "rows"). It never blocks on the network: the latest value is
// written to the job record every tenth of total and at every heartbeat,
// and each write is an event and a change of the job's ETag.
func (j *Job[T]) Progress(done, total int, unit string) { j.a.setProgress(done, total, unit) }

// Output is the job's result, streamed to jobgate's result store as it is
// written (outputs beyond 16 MiB never sit in memory; smaller ones are also
// kept until stored, to store them again when the store broke an upload
// off). Writes past the type's
// MaxResultBytes fail with ErrResultTooLarge, and the job fails
// budget_exceeded. When jobgate refuses the result for its tenant's result
// quota or the deployment's result storage, it fails the job
// budget_exceeded itself, the worker logs the refusal and reports nothing
// more, and writes past what is kept fail with ErrResultRefused. A job
// that never calls Output succeeds without a result.
func (j *Job[T]) Output() io.Writer { return j.a.output() }

// Logger is a logger carrying the job's id and attempt.
func (j *Job[T]) Logger() *slog.Logger { return j.a.log }

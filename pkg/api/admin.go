package api

import "time"

// The admin API (/v1/admin): what a tenant admin or an operator reads of
// the jobs its role reaches.

// Outcomes of one attempt (Attempt.Outcome); an attempt still running has
// none.
const (
	OutcomeSucceeded  = "succeeded"
	OutcomeFailed     = "failed"      // its worker reported a failure, or its time ran out
	OutcomeWorkerLost = "worker_lost" // its worker vanished without a verdict
	OutcomeGivenBack  = "given_back"  // its worker gave it back without a verdict
	OutcomeCanceled   = "canceled"    // the job was canceled while it ran
)

// Limits of the attempt history a job record keeps.
const (
	// MaxAttemptHistory is how many attempts a job keeps: the latest.
	MaxAttemptHistory = 25
	// MaxAttemptMessage bounds an attempt's error message, in bytes.
	MaxAttemptMessage = 2048
)

// Attempt is one attempt of a job, as the admin API shows it. Its error
// carries the full message, which the job's owner never reads.
type Attempt struct {
	Attempt   int        `json:"attempt"`
	Worker    string     `json:"worker"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	Outcome   string     `json:"outcome,omitempty"`
	Error     *Failure   `json:"error,omitempty"`
}

// AdminJob is a job resource plus what the admin API adds: whose it is, and
// (in GET /v1/admin/jobs/{id} only) its attempts and the retry links.
type AdminJob struct {
	Resource
	Tenant    string    `json:"tenant"`
	Requester string    `json:"requester"`
	Attempts  []Attempt `json:"attempts,omitempty"`
	RetryOf   string    `json:"retry_of,omitempty"`
	RetriedAs string    `json:"retried_as,omitempty"`
	// WaitingFor, on the detail of a job that waits to run (queued, or
	// running between attempts), names what nothing will start it without:
	// WaitingForWorker, WaitingForResume, WaitingForConcurrency or
	// WaitingForRateLimit. Absent when nothing holds it back.
	WaitingFor string `json:"waiting_for,omitempty"`
}

// What a job that waits to run waits for (AdminJob.WaitingFor).
const (
	// WaitingForWorker: no live worker process runs the job's type.
	WaitingForWorker = "worker"
	// WaitingForResume: an operator paused the job's type.
	WaitingForResume = "resume"
	// WaitingForConcurrency: one of the job's concurrency keys (its
	// type's Flow) is at its limit.
	WaitingForConcurrency = "concurrency"
	// WaitingForRateLimit: its type's rate bucket (for the job's key) is
	// empty.
	WaitingForRateLimit = "rate limit"
)

// AdminJobPage is a page of GET /v1/admin/jobs, newest first.
type AdminJobPage struct {
	Jobs       []AdminJob `json:"jobs"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// AdminJobFilter is what GET /v1/admin/jobs keeps; zero fields keep all.
// Tenant is for operators: a tenant admin always gets its own tenant.
type AdminJobFilter struct {
	Tenant    string
	Requester string
	Type      string
	State     State
	Category  string
	// WaitingFor keeps the jobs waiting to run for that
	// (AdminJob.WaitingFor: WaitingForConcurrency, WaitingForRateLimit,
	// WaitingForWorker or WaitingForResume).
	WaitingFor    string
	CreatedAfter  time.Time
	CreatedBefore time.Time
	Limit         int
	Cursor        string
}

// Limits of GET /v1/admin/jobs.
const (
	MaxAdminPage      = 100
	DefaultAdminPage  = 20
	MaxAdminCursorLen = 256
)

// TypeStats is one job type's line of GET /v1/admin/stats.
type TypeStats struct {
	Type     string `json:"type"`
	Queued   int64  `json:"queued"`
	Running  int64  `json:"running"`
	Retrying int64  `json:"retrying"` // running, waiting for the next attempt
	// Scheduled counts the jobs waiting for their run_at.
	Scheduled int64 `json:"scheduled"`
	// WaitingConcurrency and RateLimited count the queued jobs the type's
	// flow control holds back: waiting for a place under a concurrency key
	// at its limit, and for a token of an empty rate bucket. They are what
	// the dispatchers last told (every 2 s or so), not read from the jobs.
	WaitingConcurrency int64 `json:"waiting_concurrency"`
	RateLimited        int64 `json:"rate_limited"`
	// Workers counts the live worker processes of the type (as GET
	// /v1/types does); 0 with jobs queued or retrying means nothing runs
	// them. Paused is an operator's pause of the type.
	Workers int  `json:"workers"`
	Paused  bool `json:"paused"`
	// Endpoint: jobgate runs the type by calling its HTTP endpoint; no
	// worker process runs it, and none is missing.
	Endpoint bool `json:"endpoint,omitempty"`
	// OldestQueuedSeconds is the age of the oldest queued job (0: none).
	OldestQueuedSeconds float64  `json:"oldest_queued_seconds"`
	LastHour            Finishes `json:"last_hour"`
	LastDay             Finishes `json:"last_day"`
	// Minutes is the last hour minute by minute, with ?series=minutes only.
	Minutes *MinuteSeries `json:"minutes,omitempty"`
}

// MinuteSeries is a type's finishes per minute over the last hour: entry i
// of each array counts the jobs that reached that state in the minute
// starting Start + i minutes; the last entry is the current minute, so far.
type MinuteSeries struct {
	Start     time.Time `json:"start"`
	Succeeded []int64   `json:"succeeded"`
	Failed    []int64   `json:"failed"`
	Canceled  []int64   `json:"canceled"`
}

// SeriesMinutes is the number of minutes in a MinuteSeries.
const SeriesMinutes = 60

// Finishes counts the jobs that reached each terminal state in a window.
type Finishes struct {
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Canceled  int64 `json:"canceled"`
}

// Stats is the body of GET /v1/admin/stats.
type Stats struct {
	// Tenant is the tenant counted ("" for all, an operator's view).
	Tenant string      `json:"tenant,omitempty"`
	At     time.Time   `json:"at"`
	Types  []TypeStats `json:"types"`
}

// Bulk actions: POST /v1/admin/jobs/cancel and POST /v1/admin/jobs/retry
// change every job the filters and the role reach, each through the
// single-job path (POST /v1/admin/jobs/{id}/cancel or /retry), a bounded
// number per call.

// The two bulk actions (AdminBulkResult.Action).
const (
	BulkCancel = "cancel"
	BulkRetry  = "retry"
)

// Limits of one bulk call.
const (
	// MaxBulkJobs is the most jobs one bulk call looks at, and its
	// default limit; past it the answer has Truncated "limit" and a
	// NextCursor to go on with.
	MaxBulkJobs = 10000
	// BulkTimeBudget is how long one bulk call works; past it the answer
	// has Truncated "time" and a NextCursor.
	BulkTimeBudget = 10 * time.Second
	// MaxBulkFailures is how many failed jobs a bulk answer names.
	MaxBulkFailures = 20
)

// Why a bulk call stopped before the end (AdminBulkResult.Truncated).
const (
	TruncatedLimit    = "limit"    // it looked at its limit of jobs
	TruncatedTime     = "time"     // its time budget ran out
	TruncatedShutdown = "shutdown" // the gateway is stopping
)

// AdminBulkRequest is the body of a bulk call: the filters of GET
// /v1/admin/jobs (zero fields keep all; at least one must be set), a limit
// of jobs to look at (0: MaxBulkJobs), a cursor from an earlier call's
// NextCursor, and DryRun, which counts what the call would do and changes
// nothing. Tenant is for operators: a tenant admin may name only its own.
type AdminBulkRequest struct {
	Tenant        string    `json:"tenant,omitempty"`
	Requester     string    `json:"requester,omitempty"`
	Type          string    `json:"type,omitempty"`
	State         State     `json:"state,omitempty"`
	Category      string    `json:"category,omitempty"`
	CreatedAfter  time.Time `json:"created_after,omitzero"`
	CreatedBefore time.Time `json:"created_before,omitzero"`
	Limit         int       `json:"limit,omitempty"`
	Cursor        string    `json:"cursor,omitempty"`
	DryRun        bool      `json:"dry_run,omitempty"`
	// ConfirmPermanent (bulk retry) retries the jobs that failed
	// permanently (retryable false) too; without it they are skipped
	// and counted in AdminBulkResult.Permanent.
	ConfirmPermanent bool `json:"confirm_permanent,omitempty"`
}

// AdminBulkResult is the answer of a bulk call: what it did (with DryRun,
// what it would do) to the jobs it looked at, newest first.
type AdminBulkResult struct {
	Action string `json:"action"`
	DryRun bool   `json:"dry_run"`
	// Matched counts the jobs the filters and the role reach that this
	// call looked at (each read again from the store).
	Matched int `json:"matched"`
	// Canceled counts the jobs canceled (a dry run: that would be).
	Canceled int `json:"canceled"`
	// Retried counts the new jobs made (a dry run: that would be).
	Retried int `json:"retried"`
	// Replayed counts the jobs an earlier retry with the same
	// Idempotency-Key already retried: no new job.
	Replayed int `json:"replayed"`
	// Skipped counts the jobs left as they are: already finished (cancel),
	// neither failed nor canceled or already retried under another key
	// (retry).
	Skipped int `json:"skipped"`
	// Permanent (bulk retry) counts the retries, made or to be made, of
	// jobs that failed permanently (retryable false): with
	// confirm_permanent they are among Retried, without it among Skipped
	// ("n of these failed permanently").
	Permanent int `json:"permanent"`
	// Failed counts the jobs that could not be changed (the store did not
	// answer in time); the same call again, with the same key, finishes
	// them and changes nothing twice.
	Failed int `json:"failed"`
	// Failures names at most MaxBulkFailures of the failed jobs.
	Failures []BulkFailure `json:"failures,omitempty"`
	// Truncated says why the call stopped before the end ("" when it
	// reached it); NextCursor then goes on from there.
	Truncated  string `json:"truncated,omitempty"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// BulkFailure is a job a bulk call could not change, with the type of the
// problem the single-job call would have answered (/problems/<slug>).
type BulkFailure struct {
	JobID   string `json:"job_id"`
	Problem string `json:"problem"`
}

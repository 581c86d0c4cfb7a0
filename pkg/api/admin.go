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
}

// AdminJobPage is a page of GET /v1/admin/jobs, newest first.
type AdminJobPage struct {
	Jobs       []AdminJob `json:"jobs"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// AdminJobFilter is what GET /v1/admin/jobs keeps; zero fields keep all.
// Tenant is for operators: a tenant admin always gets its own tenant.
type AdminJobFilter struct {
	Tenant        string
	Requester     string
	Type          string
	State         State
	Category      string
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
	// OldestQueuedSeconds is the age of the oldest queued job (0: none).
	OldestQueuedSeconds float64  `json:"oldest_queued_seconds"`
	LastHour            Finishes `json:"last_hour"`
	LastDay             Finishes `json:"last_day"`
}

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

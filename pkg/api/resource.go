package api

import (
	"encoding/json"
	"time"
)

// Failure categories: why a job failed (Failure.Category).
const (
	CategoryTimeout        = "timeout"
	CategoryBudgetExceeded = "budget_exceeded"
	CategoryRenderError    = "render_error"  // jobgate's own renderer (permit_report) failed
	CategoryHandlerError   = "handler_error" // the handler of a user's type failed
	CategoryWorkerLost     = "worker_lost"
	CategoryExhausted      = "exhausted"
	CategoryExpired        = "expired" // still queued or running when its retention was about to end
	CategoryInternal       = "internal"
	CategoryCanceled       = "canceled"
	// CategoryDeadlineExceeded: canceled because no attempt had started by
	// the job's start_by.
	CategoryDeadlineExceeded = "deadline_exceeded"
)

// Progress is how far a running job is, when that can be measured.
type Progress struct {
	Done  int    `json:"done"`
	Total int    `json:"total"`
	Unit  string `json:"unit"`
}

// Failure says why a job failed (or why its last attempt did, while it
// waits for the next).
type Failure struct {
	Category  string `json:"category"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// ResultLink is the public face of a result: a signed, short-lived href plus
// what the file is.
type ResultLink struct {
	Href        string     `json:"href,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	ContentType string     `json:"content_type"`
	Size        int64      `json:"size"`
	SHA256      string     `json:"sha256"`
}

// Links are the paths a client follows from a job.
type Links struct {
	Self   string `json:"self"`
	Events string `json:"events"`
	Result string `json:"result"`
}

// Resource is the job as clients see it (the contract's job resource).
type Resource struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Params     json.RawMessage `json:"params"`
	State      State           `json:"state"`
	Attempt    int             `json:"attempt"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	StartedAt  *time.Time      `json:"started_at,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
	RetryAt    *time.Time      `json:"retry_at,omitempty"`
	// RunAt, StartBy and Priority are the job's flow fields as admitted
	// (a delay resolved to its run_at); Priority is omitted when it is
	// the default, 3.
	RunAt    *time.Time  `json:"run_at,omitempty"`
	StartBy  *time.Time  `json:"start_by,omitempty"`
	Priority int         `json:"priority,omitempty"`
	Progress *Progress   `json:"progress,omitempty"`
	Error    *Failure    `json:"error,omitempty"`
	Result   *ResultLink `json:"result,omitempty"`
	Links    Links       `json:"links"`
}

// JobPath is the status path of a job.
func JobPath(id string) string { return "/v1/jobs/" + id }

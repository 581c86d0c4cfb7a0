package job

import (
	"encoding/json"
	"time"
)

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

// Resource is the job as clients see it (the contract's job resource). It
// carries no scope, key hash or fingerprint.
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
	Progress   *Progress       `json:"progress,omitempty"`
	Error      *Failure        `json:"error,omitempty"`
	Result     *ResultLink     `json:"result,omitempty"`
	Links      Links           `json:"links"`
}

// JobPath is the status path of a job.
func JobPath(id string) string { return "/v1/jobs/" + id }

// Resource builds the public view of r. href and expires are the freshly
// signed result link; pass "" to leave the href out (events carry none).
func (r *Record) Resource(href string, expires time.Time) *Resource {
	self := JobPath(r.ID)
	res := &Resource{
		ID: r.ID, Type: r.Type, Params: r.Params, State: r.State, Attempt: r.Attempt,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, StartedAt: r.StartedAt,
		FinishedAt: r.FinishedAt, Progress: r.Progress,
		Links: Links{Self: self, Events: self + "/events", Result: self + "/result"},
	}
	if r.State == StateRunning {
		res.RetryAt = r.RetryAt
		if r.RetryAt != nil && r.Worker == "" && r.Error != nil {
			// Waiting for its next attempt: why the last one failed.
			f := *r.Error
			res.Error = &f
		}
	}
	if r.State == StateFailed {
		res.Error = r.Error
	}
	if r.State == StateSucceeded && r.Output != nil {
		res.Result = &ResultLink{ContentType: r.Output.ContentType, Size: r.Output.Size, SHA256: r.Output.SHA256}
		if href != "" {
			exp := expires.UTC()
			res.Result.Href = href
			res.Result.ExpiresAt = &exp
		}
	}
	return res
}

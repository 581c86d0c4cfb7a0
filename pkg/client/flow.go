package client

import (
	"time"
)

// The per-job flow fields of a submission (docs/api.md, "Flow fields"):
// each is part of the request, so the same options again replay the job
// and other ones under the same key are a *ConflictError.

// flow is a Submit's flow fields, as the body carries them.
type flow struct {
	RunAt    *time.Time `json:"run_at,omitempty"`
	Delay    string     `json:"delay,omitempty"`
	Priority int        `json:"priority,omitempty"`
	StartBy  *time.Time `json:"start_by,omitempty"`
}

// WithRunAt schedules the job: no attempt starts before t (at most 30 days
// ahead); the job is "scheduled" until then.
func WithRunAt(t time.Time) SubmitOption {
	return func(o *submitOptions) { t := t.UTC(); o.flow.RunAt = &t }
}

// WithDelay schedules the job d after its admission. The server resolves
// the delay once, when it admits the job; a retry of the same submission
// (the same key and delay) later replays that job.
func WithDelay(d time.Duration) SubmitOption {
	return func(o *submitOptions) { o.flow.Delay = d.String() }
}

// WithPriority orders the job among its tenant's waiting jobs of its
// type: 1 first, 5 last, 3 the default.
func WithPriority(p int) SubmitOption { return func(o *submitOptions) { o.flow.Priority = p } }

// WithStartBy cancels the job, with the error category
// "deadline_exceeded", when no attempt has started by t.
func WithStartBy(t time.Time) SubmitOption {
	return func(o *submitOptions) { t := t.UTC(); o.flow.StartBy = &t }
}

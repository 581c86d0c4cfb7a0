package job

import "time"

// Resource builds the public view of r. href and expires are the freshly
// signed result link; pass "" to leave the href out (events carry none).
func (r *Record) Resource(href string, expires time.Time) *Resource {
	self := JobPath(r.ID)
	res := &Resource{
		ID: r.ID, Type: r.Type, Params: r.Params, State: r.State, Attempt: r.Attempt,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, StartedAt: r.StartedAt,
		FinishedAt: r.FinishedAt, Progress: r.Progress,
		RunAt: r.RunAt, StartBy: r.StartBy, Priority: r.ShownPriority(),
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
	if r.State == StateFailed || r.DeadlineMissed() {
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

// ShownPriority is the priority the resource shows: none (0) for the
// default.
func (r *Record) ShownPriority() int {
	if r.Priority == DefaultPriority {
		return 0
	}
	return r.Priority
}

// DeadlineMissed reports a job canceled because it had not started by its
// start_by: the one cancel whose resource shows an error.
func (r *Record) DeadlineMissed() bool {
	return r.State == StateCanceled && r.Error != nil && r.Error.Category == CategoryDeadline
}

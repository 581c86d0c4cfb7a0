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

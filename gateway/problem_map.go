package gateway

import (
	"errors"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/api"
)

// problemOf is the one map from errors to problem documents: it builds the
// problem of err from the catalogue (pkg/api). The detail is the kind's
// fixed detail: err's own text is for the log, never for the client, as it
// may name internals (a store, a subject, a file). Only errors written for
// the client add to it: a *UserError's message, a *ValidationError's field
// errors, a *ConflictError's job.
func problemOf(err error) *Problem {
	k := job.ProblemFor(err)
	p := &Problem{Type: job.ProblemTypePrefix + k.Slug, Title: k.Title, Status: k.Status, Detail: k.Detail}
	var ue *job.UserError
	if k.Err != nil && errors.As(err, &ue) && ue.Message != "" && errors.Is(ue, k.Err) {
		p.Detail = ue.Message
	}
	var lost *api.AttemptLostError
	if errors.As(err, &lost) {
		p.Canceled = lost.Canceled
	}
	var ve *job.ValidationError
	if errors.As(err, &ve) {
		// Whoever built the list, a 422 keeps to the contract's bounds:
		// at most api.MaxFieldErrors errors in at most
		// api.MaxProblemBytes.
		var cut bool
		p.Errors, cut = api.BoundFieldErrors(ve.Errors)
		p.ErrorsTruncated = ve.Truncated || cut
	}
	var ce *job.ConflictError
	if errors.As(err, &ce) {
		p.JobID = ce.JobID
		p.Detail = ce.Error()
	}
	return p
}

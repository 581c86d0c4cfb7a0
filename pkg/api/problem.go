package api

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ProblemKind is one entry of the problem catalogue: the slug of its type
// (/problems/<slug>), its HTTP status and title, the fixed detail a client
// reads, and the sentinel error it stands for on both sides of the wire.
type ProblemKind struct {
	Slug   string
	Status int
	Title  string
	// Detail is the problem's detail, written for the client. An error's
	// own text never replaces it (it may name stores, subjects, files);
	// only a *UserError, whose message is written for the client, does.
	Detail string
	Err    error
}

// problemKinds is the one catalogue of problems: the gateway writes a
// problem for an error by it (ProblemFor), a client turns a problem back into
// the sentinel by it (Problem.Is). Order matters only where one error matches
// several sentinels; the first match wins.
var problemKinds = []ProblemKind{
	{"unauthorized", 401, "Missing or invalid bearer token",
		"send Authorization: Bearer with a valid, unexpired token", ErrUnauthorized},
	{"idempotency-key-missing", 400, "Idempotency-Key header required",
		"send an Idempotency-Key header with this request", ErrKeyMissing},
	{"idempotency-key-invalid", 400, "Idempotency-Key header invalid",
		"send exactly one Idempotency-Key header of 1-255 printable ASCII characters", ErrKeyInvalid},
	{"malformed-request", 400, "Request body is not valid JSON",
		"the body must be one JSON object, with no member name twice", ErrMalformed},
	{"validation", 422, "Request failed validation",
		"one or more fields are invalid", ErrValidation},
	{"payload-too-large", 413, "Request body exceeds 64 KiB",
		"the request body must be at most 64 KiB", ErrPayloadTooLarge},
	{"idempotency-key-reused", 409, "Idempotency-Key already used for a different request",
		"this Idempotency-Key was already used for a different request", ErrKeyReused},
	{"no-result", 404, "Job succeeded without a result",
		"the job succeeded, but its handler stored no result: there is nothing to download", ErrNoResult},
	{"not-found", 404, "Job not found",
		"no such job is visible to this token", ErrNotFound},
	{"job-terminal", 409, "Job already finished",
		"the job has already finished", ErrTerminal},
	{"result-not-ready", 409, "Result not ready yet",
		"the job has not finished yet; ask again after Retry-After", ErrResultNotReady},
	{"job-failed", 409, "Job failed; it has no result",
		"the job failed; its error says why", ErrJobFailed},
	{"job-canceled", 409, "Job was canceled; it has no result",
		"the job was canceled before it had a result", ErrJobCanceled},
	{"link-expired", 410, "Result link expired",
		"the result link expired; the job's result link gives a fresh one", ErrLinkExpired},
	{"link-invalid", 403, "Result link invalid",
		"the result link is not one this server signed", ErrLinkInvalid},
	{"result-expired", 410, "Result file no longer kept",
		"the result file is no longer kept", ErrResultExpired},
	{"rate-limited", 429, "Too many requests",
		"too many requests; retry after Retry-After", ErrRateLimited},
	{"storage-full", 507, "Storage full; nothing was admitted",
		"the deployment's storage budget is used up; nothing was admitted: retry after Retry-After with the same Idempotency-Key", ErrStorageFull},
	{"unavailable", 503, "Job store unavailable; retry with the same key",
		"the job store is unavailable; retry after Retry-After with the same Idempotency-Key", ErrUnavailable},
	{"unsupported-media-type", 415, "Request body must be uncompressed application/json",
		"send the body uncompressed, as application/json", ErrUnsupportedMedia},
	{"bad-request", 400, "Bad request",
		"the request is not one this server accepts", ErrBadRequest},
	{"method-not-allowed", 405, "Method not allowed",
		"this method is not allowed on this path", ErrMethodNotAllowed},
	{"forbidden", 403, "Forbidden",
		"this request is not allowed", ErrForbidden},
	{"job-not-retryable", 409, "Job cannot be retried",
		"only a failed or canceled job can be retried", ErrNotRetryable},
	{"job-not-scheduled", 409, "Job is not scheduled",
		"only a scheduled job (one whose run_at is still ahead) can be made to run now", ErrNotScheduled},
	{"permanent-failure", 409, "Job failed permanently; confirm its retry",
		"the job failed permanently (retryable: false), so a retry will likely fail the same way: retry with confirm_permanent to go ahead", ErrPermanentFailure},
	{"type-in-use", 409, "Job type in use",
		"jobs of this type are queued or running: cancel them or let them end, then delete the type", ErrTypeInUse},
	{"type-name-taken", 409, "Job type name taken",
		"a worker credential declared a job type of this name (or it is built in): an endpoint type needs a name of its own", ErrTypeNameTaken},
	{"attempt-lost", 409, "Attempt no longer current",
		"this callback's attempt is no longer the job's current one (it ended, timed out, was taken over or canceled): stop working on it", ErrAttemptLost},
}

// InternalProblem is the kind of every error the catalogue does not name. Its
// details are not shown to clients: the gateway logs the cause under the
// problem's request id.
var InternalProblem = ProblemKind{Slug: "internal", Status: 500, Title: "Internal error",
	Detail: "the server failed to handle the request; its log has the cause under this request id"}

// ProblemFor returns the catalogue entry of err: the first whose sentinel err
// matches (errors.Is), else InternalProblem.
func ProblemFor(err error) ProblemKind {
	for _, k := range problemKinds {
		if errors.Is(err, k.Err) {
			return k
		}
	}
	return InternalProblem
}

// ProblemKinds returns a copy of the catalogue (documentation, tests).
func ProblemKinds() []ProblemKind { return append([]ProblemKind(nil), problemKinds...) }

// problemBySlug returns the catalogue entry of a slug.
func problemBySlug(slug string) (ProblemKind, bool) {
	for _, k := range problemKinds {
		if k.Slug == slug {
			return k, true
		}
	}
	return ProblemKind{}, false
}

// ProblemTypePrefix starts the type URI of every problem.
const ProblemTypePrefix = "/problems/"

// Problem is an RFC 9457 problem document, as the gateway writes it and a
// client reads it. As an error it matches the catalogue's sentinel of its
// slug (errors.Is(err, ErrNotFound)), and errors.As finds a *ConflictError
// in an idempotency-key-reused problem and a *ValidationError in a
// validation problem.
type Problem struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail,omitempty"`
	Errors []FieldError `json:"errors,omitempty"`
	// ErrorsTruncated says Errors is not the whole list (MaxFieldErrors,
	// MaxProblemBytes).
	ErrorsTruncated bool   `json:"errors_truncated,omitempty"`
	JobID           string `json:"job_id,omitempty"`
	// Canceled, on an attempt-lost problem, says the job's owner
	// canceled it.
	Canceled bool `json:"canceled,omitempty"`
	// RequestID names the request in the server's log, where the cause of
	// the problem is (the gateway sets it; also the X-Request-Id header).
	RequestID string `json:"request_id,omitempty"`
	// RetryAfter is the Retry-After header that came with the problem (the
	// server sends it as a header, never in the body).
	RetryAfter time.Duration `json:"-"`
}

// Slug is the last segment of the problem type ("not-found").
func (p *Problem) Slug() string {
	if i := strings.LastIndexByte(p.Type, '/'); i >= 0 {
		return p.Type[i+1:]
	}
	return p.Type
}

func (p *Problem) Error() string {
	msg := p.Detail
	if msg == "" {
		msg = p.Title
	}
	if msg == "" {
		msg = fmt.Sprintf("HTTP %d", p.Status)
	}
	if len(p.Errors) > 0 {
		// The fields are what a person fixes: name them, not only "invalid".
		msg += ": " + summary(p.Errors, p.ErrorsTruncated)
	}
	if p.JobID != "" && !strings.Contains(msg, p.JobID) {
		msg += " (it belongs to job " + p.JobID + ")"
	}
	if slug := p.Slug(); slug != "" {
		return fmt.Sprintf("%s (%d %s)", msg, p.Status, slug)
	}
	return fmt.Sprintf("%s (%d)", msg, p.Status)
}

// Is matches the catalogue's sentinel of the problem's slug.
func (p *Problem) Is(target error) bool {
	k, ok := problemBySlug(p.Slug())
	return ok && k.Err == target
}

// As lets errors.As find the typed errors the problem stands for: a
// *ConflictError (naming the job the key belongs to) in an
// idempotency-key-reused problem, a *ValidationError (the field errors) in
// a validation problem.
func (p *Problem) As(target any) bool {
	switch t := target.(type) {
	case **ConflictError:
		if p.Slug() == "idempotency-key-reused" {
			*t = &ConflictError{JobID: p.JobID, Problem: p}
			return true
		}
	case **ValidationError:
		if p.Slug() == "validation" || p.Status == 422 {
			*t = &ValidationError{Errors: p.Errors, Truncated: p.ErrorsTruncated, Problem: p}
			return true
		}
	}
	return false
}

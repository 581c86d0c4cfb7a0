package job

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Sentinels that exist only as HTTP problems (the rest are in errors.go).
var (
	ErrUnsupportedMedia = errors.New("unsupported media type")
	ErrBadRequest       = errors.New("bad request")
	ErrResultExpired    = errors.New("result file no longer kept")
	ErrMethodNotAllowed = errors.New("method not allowed")
	ErrForbidden        = errors.New("forbidden")
)

// ProblemKind is one entry of the problem catalogue: the slug of its type
// (/problems/<slug>), its HTTP status and title, and the sentinel error it
// stands for on both sides of the wire.
type ProblemKind struct {
	Slug   string
	Status int
	Title  string
	Err    error
}

// problemKinds is the one catalogue of problems: the gateway writes a
// problem for an error by it (ProblemFor), a client turns a problem back into
// the sentinel by it (Problem.Is). Order matters only where one error matches
// several sentinels; the first match wins.
var problemKinds = []ProblemKind{
	{"unauthorized", http.StatusUnauthorized, "Missing or invalid bearer token", ErrUnauthorized},
	{"idempotency-key-missing", http.StatusBadRequest, "Idempotency-Key header required", ErrKeyMissing},
	{"idempotency-key-invalid", http.StatusBadRequest, "Idempotency-Key header invalid", ErrKeyInvalid},
	{"malformed-request", http.StatusBadRequest, "Request body is not valid JSON", ErrMalformed},
	{"validation", http.StatusUnprocessableEntity, "Request failed validation", ErrValidation},
	{"payload-too-large", http.StatusRequestEntityTooLarge, "Request body exceeds 64 KiB", ErrPayloadTooLarge},
	{"idempotency-key-reused", http.StatusConflict, "Idempotency-Key already used for a different request", ErrKeyReused},
	{"not-found", http.StatusNotFound, "Job not found", ErrNotFound},
	{"job-terminal", http.StatusConflict, "Job already finished", ErrTerminal},
	{"result-not-ready", http.StatusConflict, "Result not ready yet", ErrResultNotReady},
	{"job-failed", http.StatusConflict, "Job failed; it has no result", ErrJobFailed},
	{"job-canceled", http.StatusConflict, "Job was canceled; it has no result", ErrJobCanceled},
	{"link-expired", http.StatusGone, "Result link expired", ErrLinkExpired},
	{"link-invalid", http.StatusForbidden, "Result link invalid", ErrLinkInvalid},
	{"result-expired", http.StatusGone, "Result file no longer kept", ErrResultExpired},
	{"rate-limited", http.StatusTooManyRequests, "Too many requests", ErrRateLimited},
	{"unavailable", http.StatusServiceUnavailable, "Job store unavailable; retry with the same key", ErrUnavailable},
	{"unsupported-media-type", http.StatusUnsupportedMediaType, "Request body must be uncompressed application/json", ErrUnsupportedMedia},
	{"bad-request", http.StatusBadRequest, "Bad request", ErrBadRequest},
	{"method-not-allowed", http.StatusMethodNotAllowed, "Method not allowed", ErrMethodNotAllowed},
	{"forbidden", http.StatusForbidden, "Forbidden", ErrForbidden},
}

// InternalProblem is the kind of every error the catalogue does not name. Its
// details are not shown to clients.
var InternalProblem = ProblemKind{Slug: "internal", Status: http.StatusInternalServerError, Title: "Internal error"}

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
	JobID  string       `json:"job_id,omitempty"`
	// RetryAfter is the Retry-After header that came with the problem (the
	// server sends it as a header, never in the body).
	RetryAfter time.Duration `json:"-"`
}

// NewProblem builds the problem document of err from the catalogue. The
// detail is err's text, except for internal errors (not shown to clients)
// and not-found (the same words whether a job is missing or someone else's).
func NewProblem(err error) *Problem {
	k := ProblemFor(err)
	p := &Problem{Type: ProblemTypePrefix + k.Slug, Title: k.Title, Status: k.Status}
	switch {
	case k.Err == ErrNotFound:
		p.Detail = "no such job is visible to this token"
	case k.Err != nil:
		p.Detail = err.Error()
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		p.Errors = ve.Errors
		p.Detail = "one or more fields are invalid"
	}
	var ce *ConflictError
	if errors.As(err, &ce) {
		p.JobID = ce.JobID
	}
	return p
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
		msg = http.StatusText(p.Status)
	}
	if len(p.Errors) > 0 {
		// The fields are what a person fixes: name them, not only "invalid".
		parts := make([]string, len(p.Errors))
		for i, fe := range p.Errors {
			parts[i] = fe.Field + ": " + fe.Message
		}
		msg += ": " + strings.Join(parts, "; ")
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
		if p.Slug() == "validation" || p.Status == http.StatusUnprocessableEntity {
			*t = &ValidationError{Errors: p.Errors, Problem: p}
			return true
		}
	}
	return false
}

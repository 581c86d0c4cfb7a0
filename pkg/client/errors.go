package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/jobgate/jobgate/pkg/job"
)

// Sentinel errors of the SDK itself (server problems map to the job package's
// sentinels, see ProblemError.Is).
var (
	// ErrJournalLocked means another process held the journal file longer
	// than the lock timeout. Nothing was sent.
	ErrJournalLocked = errors.New("journal is locked by another process")
	// ErrNotConfirmed means a submission got no definitive answer (the
	// server was unreachable or kept failing until the retry budget or the
	// context ran out). Its key stays in the journal: submitting the same
	// request again, or Resume, finishes it with the same key and job.
	ErrNotConfirmed = errors.New("submission not confirmed")
	// ErrDigestMismatch means a downloaded result does not match the size or
	// SHA-256 the job resource announced.
	ErrDigestMismatch = errors.New("downloaded result does not match its digest")
	// ErrUnexpectedResponse is a response the contract does not describe.
	ErrUnexpectedResponse = errors.New("unexpected response")
)

// ProblemError is an RFC 9457 problem the server answered with (or a bare
// error status, described as well as the response allows).
type ProblemError struct {
	Status     int              // HTTP status
	Type       string           // e.g. "/problems/not-found"
	Title      string           // short summary
	Detail     string           // what went wrong with this request
	Errors     []job.FieldError // field errors of a validation problem
	JobID      string           // the job a conflict refers to, when named
	RetryAfter time.Duration    // the Retry-After the server sent, if any
}

// Slug is the last segment of the problem type ("not-found").
func (e *ProblemError) Slug() string {
	if i := strings.LastIndexByte(e.Type, '/'); i >= 0 {
		return e.Type[i+1:]
	}
	return e.Type
}

func (e *ProblemError) Error() string {
	msg := e.Detail
	if msg == "" {
		msg = e.Title
	}
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if slug := e.Slug(); slug != "" {
		return fmt.Sprintf("%s (%d %s)", msg, e.Status, slug)
	}
	return fmt.Sprintf("%s (%d)", msg, e.Status)
}

// slugErrors maps problem slugs of the contract to the domain's sentinels so
// callers can write errors.Is(err, job.ErrNotFound).
var slugErrors = map[string]error{
	"unauthorized":            job.ErrUnauthorized,
	"idempotency-key-missing": job.ErrKeyMissing,
	"idempotency-key-invalid": job.ErrKeyInvalid,
	"malformed-request":       job.ErrMalformed,
	"validation":              job.ErrValidation,
	"payload-too-large":       job.ErrPayloadTooLarge,
	"idempotency-key-reused":  job.ErrKeyReused,
	"not-found":               job.ErrNotFound,
	"job-terminal":            job.ErrTerminal,
	"result-not-ready":        job.ErrResultNotReady,
	"job-failed":              job.ErrJobFailed,
	"job-canceled":            job.ErrJobCanceled,
	"link-expired":            job.ErrLinkExpired,
	"link-invalid":            job.ErrLinkInvalid,
	"rate-limited":            job.ErrRateLimited,
	"unavailable":             job.ErrUnavailable,
}

// Is matches the job package sentinel of the problem's slug.
func (e *ProblemError) Is(target error) bool {
	s, ok := slugErrors[e.Slug()]
	return ok && s == target
}

// ConflictError is a 409 idempotency-key-reused: the key already belongs to
// another request. JobID names the job it belongs to when the server says.
type ConflictError struct {
	*ProblemError
}

func (e *ConflictError) Error() string {
	if e.JobID != "" {
		return fmt.Sprintf("idempotency key already used for job %s with a different request: %s", e.JobID, e.ProblemError.Error())
	}
	return "idempotency key already used for a different request: " + e.ProblemError.Error()
}

// Unwrap exposes the problem.
func (e *ConflictError) Unwrap() error { return e.ProblemError }

// ValidationError is a 422: the request's type or params are invalid. The
// key was not consumed.
type ValidationError struct {
	*ProblemError
}

func (e *ValidationError) Error() string {
	if len(e.Errors) == 0 {
		return "invalid request: " + e.ProblemError.Error()
	}
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		parts[i] = fe.Field + ": " + fe.Message
	}
	return "invalid request: " + strings.Join(parts, "; ")
}

// Unwrap exposes the problem.
func (e *ValidationError) Unwrap() error { return e.ProblemError }

// maxProblemBody bounds how much of an error body is read.
const maxProblemBody = 64 << 10

// problemFrom reads (and closes) an error response and returns the typed
// error for it.
func problemFrom(resp *http.Response, now time.Time) error {
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBody))
	p := &ProblemError{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header, now)}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/problem+json" || mt == "application/json" {
		var doc struct {
			Type   string           `json:"type"`
			Title  string           `json:"title"`
			Detail string           `json:"detail"`
			Errors []job.FieldError `json:"errors"`
			JobID  string           `json:"job_id"`
		}
		if json.Unmarshal(raw, &doc) == nil {
			p.Type, p.Title, p.Detail, p.Errors, p.JobID = doc.Type, doc.Title, doc.Detail, doc.Errors, doc.JobID
		}
	}
	if p.Type == "" && p.Detail == "" {
		// Not a problem document (a proxy's error page, say): keep one line
		// of it so the user sees something meaningful.
		line, _, _ := strings.Cut(strings.TrimSpace(string(raw)), "\n")
		if len(line) > 200 {
			line = line[:200]
		}
		p.Detail = line
	}
	if p.JobID == "" && p.Slug() == "idempotency-key-reused" {
		p.JobID = jobIDIn(p.Detail)
	}
	switch {
	case resp.StatusCode == http.StatusConflict && p.Slug() == "idempotency-key-reused":
		return &ConflictError{p}
	case resp.StatusCode == http.StatusUnprocessableEntity:
		return &ValidationError{p}
	}
	return p
}

// jobIDIn finds a job id mentioned in a problem's detail, for servers that
// name the existing job only in prose.
func jobIDIn(s string) string {
	for _, f := range strings.FieldsFunc(s, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) {
		if job.ValidID(f) {
			return f
		}
	}
	return ""
}

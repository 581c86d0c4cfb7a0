package api

import (
	"errors"
	"fmt"
)

// Sentinel errors, one per entry of the problem catalogue (problem.go): the
// server wraps them with %w and writes the problem of each; a client's
// errors.Is(err, ErrNotFound) matches the problem it read back.
var (
	ErrNotFound         = errors.New("job not found")
	ErrKeyReused        = errors.New("idempotency key reused with a different request")
	ErrKeyMissing       = errors.New("idempotency key missing")
	ErrKeyInvalid       = errors.New("idempotency key invalid")
	ErrMalformed        = errors.New("malformed request")
	ErrTerminal         = errors.New("job already terminal")
	ErrResultNotReady   = errors.New("result not ready")
	ErrJobFailed        = errors.New("job failed")
	ErrJobCanceled      = errors.New("job canceled")
	ErrUnauthorized     = errors.New("unauthorized")
	ErrUnavailable      = errors.New("job store unavailable")
	ErrStorageFull      = errors.New("storage budget used up")
	ErrPayloadTooLarge  = errors.New("payload too large")
	ErrRateLimited      = errors.New("rate limited")
	ErrLinkExpired      = errors.New("result link expired")
	ErrLinkInvalid      = errors.New("result link invalid")
	ErrUnsupportedMedia = errors.New("unsupported media type")
	ErrBadRequest       = errors.New("bad request")
	ErrResultExpired    = errors.New("result file no longer kept")
	ErrMethodNotAllowed = errors.New("method not allowed")
	ErrForbidden        = errors.New("forbidden")
	// ErrNotRetryable: an admin retry of a job that is neither failed nor
	// canceled.
	ErrNotRetryable = errors.New("job not retryable")
	// ErrNotScheduled: an admin run-now of a job that is not scheduled.
	ErrNotScheduled = errors.New("job not scheduled")
	// ErrTypeInUse: an operator's delete of a job type while any of its
	// jobs is queued or running.
	ErrTypeInUse = errors.New("job type in use")
	// ErrNoResult: the result of a job that succeeded without one (its
	// handler wrote nothing).
	ErrNoResult = errors.New("job succeeded without a result")
	// ErrPermanentFailure: an admin retry of a job that failed
	// permanently (retryable false), without the caller's confirmation.
	ErrPermanentFailure = errors.New("job failed permanently")
)

// FieldError names one invalid field of a request. Field is a JSON pointer
// into the request body ("/params/pages", "/type"); Rule, when set, is the
// JSON Schema keyword that failed ("required", "maximum", ...).
type FieldError struct {
	Field   string `json:"field"`
	Rule    string `json:"rule,omitempty"`
	Message string `json:"message"`
}

// ValidationError lists the problems found in a request's type and params:
// all of them, or the first MaxFieldErrors with Truncated set. It matches
// ErrValidation with errors.Is.
type ValidationError struct {
	Errors []FieldError
	// Truncated says Errors is not the whole list: validation stopped at
	// MaxFieldErrors, or a field or message was cut to its bound
	// ("errors_truncated" in the problem document).
	Truncated bool
	// Problem is the problem document a client read it from; nil on the
	// server side.
	Problem *Problem
}

// ErrValidation is the sentinel a *ValidationError matches.
var ErrValidation = errors.New("validation failed")

// Error names the first few fields and how many there are: the text goes
// to logs, where a list of a hundred errors (each up to a bound) is noise.
func (e *ValidationError) Error() string {
	return "validation failed: " + summary(e.Errors, e.Truncated)
}

// Is lets errors.Is(err, ErrValidation) match.
func (e *ValidationError) Is(target error) bool { return target == ErrValidation }

// ConflictError says a key was already used for another request and names
// the job it belongs to, so a client can find it.
type ConflictError struct {
	JobID string
	// Problem is the problem document a client read it from; nil on the
	// server side.
	Problem *Problem
}

func (e *ConflictError) Error() string {
	if e.JobID == "" {
		return "idempotency key already used for a different request"
	}
	return fmt.Sprintf("idempotency key already used for job %s with a different request", e.JobID)
}

// Is lets errors.Is(err, ErrKeyReused) match.
func (e *ConflictError) Is(target error) bool { return target == ErrKeyReused }

// UserError is an error whose message is written for the client: the
// problem document of it carries Message as its detail (the gateway's problemOf), where
// any other error's text is replaced by the catalogue's fixed detail. Err is
// the catalogue's sentinel it stands for; Message must name nothing of the
// server (no store, subject or file), only what the client sent or may do.
type UserError struct {
	Err     error
	Message string
}

// Userf returns a *UserError for sentinel with a formatted message.
func Userf(sentinel error, format string, args ...any) error {
	return &UserError{Err: sentinel, Message: fmt.Sprintf(format, args...)}
}

func (e *UserError) Error() string { return e.Err.Error() + ": " + e.Message }

// Unwrap lets errors.Is(err, sentinel) match.
func (e *UserError) Unwrap() error { return e.Err }

package gateway

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/pkg/job"
)

// Problem is an RFC 9457 problem document.
type Problem struct {
	Type   string           `json:"type"`
	Title  string           `json:"title"`
	Status int              `json:"status"`
	Detail string           `json:"detail,omitempty"`
	Errors []job.FieldError `json:"errors,omitempty"`
	JobID  string           `json:"job_id,omitempty"`
}

type problemKind struct {
	status int
	slug   string
	title  string
}

// problems is the one map from domain errors to HTTP problems. Order matters
// only where one error matches several sentinels; the first match wins.
var problems = []struct {
	err  error
	kind problemKind
}{
	{job.ErrUnauthorized, problemKind{http.StatusUnauthorized, "unauthorized", "Missing or invalid bearer token"}},
	{job.ErrKeyMissing, problemKind{http.StatusBadRequest, "idempotency-key-missing", "Idempotency-Key header required"}},
	{job.ErrKeyInvalid, problemKind{http.StatusBadRequest, "idempotency-key-invalid", "Idempotency-Key header invalid"}},
	{job.ErrMalformed, problemKind{http.StatusBadRequest, "malformed-request", "Request body is not valid JSON"}},
	{job.ErrValidation, problemKind{http.StatusUnprocessableEntity, "validation", "Request failed validation"}},
	{job.ErrPayloadTooLarge, problemKind{http.StatusRequestEntityTooLarge, "payload-too-large", "Request body exceeds 64 KiB"}},
	{job.ErrKeyReused, problemKind{http.StatusConflict, "idempotency-key-reused", "Idempotency-Key already used for a different request"}},
	{job.ErrNotFound, problemKind{http.StatusNotFound, "not-found", "Job not found"}},
	{job.ErrTerminal, problemKind{http.StatusConflict, "job-terminal", "Job already finished"}},
	{job.ErrResultNotReady, problemKind{http.StatusConflict, "result-not-ready", "Result not ready yet"}},
	{job.ErrJobFailed, problemKind{http.StatusConflict, "job-failed", "Job failed; it has no result"}},
	{job.ErrJobCanceled, problemKind{http.StatusConflict, "job-canceled", "Job was canceled; it has no result"}},
	{job.ErrLinkExpired, problemKind{http.StatusGone, "link-expired", "Result link expired"}},
	{job.ErrLinkInvalid, problemKind{http.StatusForbidden, "link-invalid", "Result link invalid"}},
	{errResultGone, problemKind{http.StatusGone, "result-expired", "Result file no longer kept"}},
	{job.ErrRateLimited, problemKind{http.StatusTooManyRequests, "rate-limited", "Too many requests"}},
	{job.ErrUnavailable, problemKind{http.StatusServiceUnavailable, "unavailable", "Job store unavailable; retry with the same key"}},
	{errUnsupportedMedia, problemKind{http.StatusUnsupportedMediaType, "unsupported-media-type", "Content-Type must be application/json"}},
	{errBadQuery, problemKind{http.StatusBadRequest, "bad-request", "Invalid query parameter"}},
	{errBadRequest, problemKind{http.StatusBadRequest, "bad-request", "Bad request"}},
}

var (
	errResultGone       = errors.New("result object expired")
	errUnsupportedMedia = errors.New("unsupported media type")
	errBadQuery         = errors.New("bad query parameter")
	errBadRequest       = errors.New("bad request")
)

var internalKind = problemKind{http.StatusInternalServerError, "internal", "Internal error"}

func kindOf(err error) problemKind {
	for _, p := range problems {
		if errors.Is(err, p.err) {
			return p.kind
		}
	}
	return internalKind
}

// writeProblem renders err as a problem. Details of internal errors are not
// shown to clients; they are logged by the caller.
func writeProblem(c *fiber.Ctx, err error) error {
	k := kindOf(err)
	p := Problem{Type: "/problems/" + k.slug, Title: k.title, Status: k.status}
	switch {
	case k.slug == "not-found":
		// The same words whether the job is missing or someone else's.
		p.Detail = "no such job is visible to this token"
	case k != internalKind:
		p.Detail = err.Error()
	}
	var ve *job.ValidationError
	if errors.As(err, &ve) {
		p.Errors = ve.Errors
		p.Detail = "one or more fields are invalid"
	}
	var ce *job.ConflictError
	if errors.As(err, &ce) {
		p.JobID = ce.JobID
	}
	switch k.status {
	case http.StatusServiceUnavailable:
		c.Set(fiber.HeaderRetryAfter, "2")
	case http.StatusTooManyRequests:
		if c.GetRespHeader(fiber.HeaderRetryAfter) == "" {
			c.Set(fiber.HeaderRetryAfter, "1")
		}
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Status(k.status)
	body, _ := jsonMarshal(p)
	c.Set(fiber.HeaderContentType, "application/problem+json")
	return c.Send(body)
}

// retryAfterErr carries a Retry-After value with a rate-limit error.
func setRetryAfter(c *fiber.Ctx, seconds int) {
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(seconds))
}

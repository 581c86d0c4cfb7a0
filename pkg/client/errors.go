package client

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/retry"
	"github.com/jobgate/jobgate/pkg/api"
)

// Sentinel errors of the SDK itself (server problems match the job package's
// sentinels, see api.Problem).
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
// error status, described as well as the response allows). It is the job
// package's Problem: errors.Is matches the job sentinel of its slug
// (api.ErrNotFound, api.ErrKeyReused, ...), one catalogue for server and
// client.
type ProblemError = api.Problem

// ConflictError is a 409 idempotency-key-reused: the key already belongs to
// another request. JobID names the job it belongs to when the server says.
// errors.As finds it in a *ProblemError of that slug.
type ConflictError = api.ConflictError

// ValidationError is a 422: the request's type or params are invalid, the
// key was not consumed. errors.As finds it in a *ProblemError of that
// status.
type ValidationError = api.ValidationError

// maxProblemBody bounds how much of an error body is read.
const maxProblemBody = 64 << 10

// problemFrom reads (and closes) an error response and returns the typed
// error for it.
func problemFrom(resp *http.Response, now time.Time) error {
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBody))
	p := &ProblemError{Status: resp.StatusCode, RetryAfter: retry.After(resp.Header, now)}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/problem+json" || mt == "application/json" {
		var doc struct {
			Type   string           `json:"type"`
			Title  string           `json:"title"`
			Detail string           `json:"detail"`
			Errors []api.FieldError `json:"errors"`
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
	return p
}

// jobIDIn finds a job id mentioned in a problem's detail, for servers that
// name the existing job only in prose.
func jobIDIn(s string) string {
	for _, f := range strings.FieldsFunc(s, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) {
		if api.ValidID(f) {
			return f
		}
	}
	return ""
}

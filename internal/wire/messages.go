package wire

import (
	"encoding/json"
	"time"

	"github.com/jobgate/jobgate/pkg/api"
)

// Limits of the protocol's messages.
const (
	// MaxRequest bounds a request's body (a declaration with its schema is
	// the largest).
	MaxRequest = 128 << 10
	// ChunkSize is the largest chunk of a result upload.
	ChunkSize = 256 << 10
	// MaxWait bounds how long a next request is held for work.
	MaxWait = 10 * time.Second
	// MaxRunningTenants bounds the tenants a newcomer request names.
	MaxRunningTenants = 1024
)

// Error codes of a reply.
const (
	CodeBadRequest  = "bad_request" // the request is malformed: a worker bug
	CodeForbidden   = "forbidden"   // the credential may not do this (another's type, a built-in)
	CodeInvalid     = "invalid"     // the declaration is refused (its schema, its limits)
	CodeLost        = "lost"        // the job is not this claim's any more: stop working on it
	CodeTooLarge    = "too_large"   // the result is larger than the type allows
	CodeUnavailable = "unavailable" // the store could not be reached: try again later
	CodeThrottled   = "throttled"   // too many requests of this credential: slow down
	CodeUnknown     = "unknown"     // no such job, upload or type
)

// Error is a refused request.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// RetryAfterMS, on some throttled refusals (a declaration past its
	// credential's limit of changes), is how long to wait before asking
	// again: a request sooner is refused the same way.
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Reply is the envelope of every reply: Error set, or the operation's
// answer in the other fields.
type Reply struct {
	Error *Error `json:"error,omitempty"`
	// Job answers next (nil: no work within the wait).
	Job *Assignment `json:"job,omitempty"`
	// Upload answers open: where the chunks go.
	Upload *UploadTarget `json:"upload,omitempty"`
	// Stored answers the last chunk of an upload.
	Stored *StoredResult `json:"stored,omitempty"`
	// Canceled answers a beat of a job whose owner canceled it (also as
	// Error with CodeLost): the handler should stop.
	Canceled bool `json:"canceled,omitempty"`
	// Failed answers an upload chunk refused because the result does not
	// fit the deployment's result storage or its tenant's result quota
	// (also as Error with CodeTooLarge): the broker has failed the job
	// itself (budget_exceeded), so the worker reports nothing more of it.
	Failed bool `json:"failed,omitempty"`
	// LeaseMS answers a beat: for how long from this answer the attempt
	// is the worker's for sure (no other attempt of the job, nor of its
	// concurrency keys' other jobs in its place, can start before). A
	// worker that has no later beat answered ok by then, counted from
	// when it sent this beat, stops its handler and reports nothing more:
	// the attempt is lost. Absent (0) from a jobgate older than it.
	LeaseMS int64 `json:"lease_ms,omitempty"`
}

// Declaration is a job type as its worker declares it.
type Declaration struct {
	Name           string          `json:"name"`
	Description    string          `json:"description,omitempty"`
	Schema         json.RawMessage `json:"schema"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	Attempts       int             `json:"attempts"`
	MaxResultBytes int64           `json:"max_result_bytes"`
	ContentType    string          `json:"content_type"`
	// Flow: the optional retry, concurrency and rate_limit fields.
	api.Flow
}

// DeclareRequest declares the type of the subject.
type DeclareRequest struct {
	Worker string      `json:"worker"`
	Type   Declaration `json:"type"`
}

// HelloRequest says a process serves the type (every 10s).
type HelloRequest struct {
	Worker      string    `json:"worker"`
	Concurrency int       `json:"concurrency"`
	StartedAt   time.Time `json:"started_at"`
	// Busy is optional: how many of the type's jobs the process runs now
	// (0 to MaxBusy). Workers that leave it out are listed with their
	// busy slots unknown.
	Busy *int `json:"busy,omitempty"`
}

// MaxBusy bounds a hello's busy: a process's slots of a type (at most
// 1,024) and its newcomer slots.
const MaxBusy = 2048

// NextRequest asks for the next job of the type whose turn it is.
type NextRequest struct {
	Worker string `json:"worker"`
	// WaitMS is how long the request may be held for work; at most MaxWait.
	WaitMS int64 `json:"wait_ms"`
	// Newcomer asks only for work of a tenant none of whose jobs of the
	// type this process runs (named in Running).
	Newcomer bool     `json:"newcomer,omitempty"`
	Running  []string `json:"running,omitempty"`
}

// Assignment is a claimed job: the worker holds it while its token is
// the job's current claim.
type Assignment struct {
	Key       string          `json:"key"`
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Tenant    string          `json:"tenant"`
	Requester string          `json:"requester"`
	Attempt   int             `json:"attempt"`
	Attempts  int             `json:"attempts"`
	CreatedAt time.Time       `json:"created_at"`
	Params    json.RawMessage `json:"params"`
	// Token is the claim's fencing token: every later request about the
	// job carries it, and jobgate refuses it once the claim is gone.
	Token string `json:"token"`
	// TimeoutMS is the attempt's time budget.
	TimeoutMS int64 `json:"timeout_ms"`
	// BeatMS is the longest time between two beats; a claim silent for
	// three times as long is taken away.
	BeatMS int64 `json:"beat_ms"`
	// LeaseMS is for how long from this answer the attempt is the
	// worker's for sure without a beat (Reply.LeaseMS); absent (0) from a
	// jobgate older than it.
	LeaseMS int64 `json:"lease_ms,omitempty"`
	// MaxResultBytes bounds the result.
	MaxResultBytes int64 `json:"max_result_bytes"`
	// TraceParent and TraceState (optional) are the W3C trace context of
	// the attempt's span: a worker traces its handler as its child. Absent
	// when the job is not traced.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// Progress is how far an attempt is.
type Progress struct {
	Done  int    `json:"done"`
	Total int    `json:"total"`
	Unit  string `json:"unit"`
}

// Held names a job the worker holds.
type Held struct {
	Key   string `json:"key"`
	Token string `json:"token"`
}

// BeatRequest keeps a claim alive, with the latest progress.
type BeatRequest struct {
	Held
	Progress *Progress `json:"progress,omitempty"`
}

// UploadTarget is where an upload's chunks go (UploadSubject).
type UploadTarget struct {
	Host   string `json:"host"`
	ID     string `json:"id"`
	Object string `json:"object"`
}

// Chunk headers: every chunk carries its sequence number from 0; the last
// one (perhaps empty) carries ChunkLast.
const (
	HeaderSeq  = "Jobgate-Seq"
	HeaderLast = "Jobgate-Last"
)

// StoredResult is what jobgate stored of an upload: the worker checks it
// against what it wrote.
type StoredResult struct {
	Object string `json:"object"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// DoneRequest finishes a held job as succeeded, with its stored result
// (nil: no result).
type DoneRequest struct {
	Held
	Result   *StoredResult `json:"result,omitempty"`
	Progress *Progress     `json:"progress,omitempty"`
	// Next (optional) asks for the worker's next job of the type in the
	// same reply, as a next request would, but only a job ready now: its
	// wait is not used, and the reply never waits. With no job ready the
	// reply carries none, and the worker asks with a next request.
	Next *NextRequest `json:"next,omitempty"`
}

// Failure kinds a worker reports; jobgate chooses the category.
const (
	KindError     = "error"     // the handler returned an error: retried while attempts remain
	KindPermanent = "permanent" // the handler said retrying cannot help
	KindTimeout   = "timeout"   // the attempt's budget ran out
	KindTooLarge  = "too_large" // the result outgrew the type's limit
	KindInternal  = "internal"  // the result could not be stored: retried
	KindBudget    = "budget"    // the handler says the request exceeds a limit of its own (budget_exceeded)
	KindPanic     = "panic"     // the handler panicked
	// The kinds of jobgate's own endpoint caller (docs/endpoints.md),
	// refused from any other credential: the handler answered a 4xx other
	// than 408, 425 and 429 (not retried), or could not be reached or
	// answered 408, 425, 429 or 5xx (retried).
	KindEndpointRejected = "endpoint_rejected"
	KindEndpointError    = "endpoint_error"
)

// FailRequest ends a held job's attempt with a failure.
type FailRequest struct {
	Held
	Kind string `json:"kind"`
	// Retryable, for KindBudget and KindInternal: another attempt may
	// succeed.
	Retryable bool `json:"retryable,omitempty"`
	// Message is for the operator (logs, the attempt history): it may name
	// internals. At most 2 KiB is kept.
	Message string `json:"message"`
	// UserMessage, if set, is what the job's owner reads; without it they
	// read a generic message of the category. At most 500 bytes.
	UserMessage string `json:"user_message,omitempty"`
	// RetryAfterMS (optional, added within v1), on a retryable failure, is
	// the least time before the next attempt (an endpoint's Retry-After):
	// the job waits the longer of it and its backoff, at most
	// MaxRetryAfter.
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`
}

// MaxRetryAfter bounds how long a failure's RetryAfterMS may postpone the
// next attempt.
const MaxRetryAfter = time.Hour

// GiveBackRequest hands a held job back without a verdict (the worker is
// stopping, or its result could not be stored): the attempt uses up none
// of the job's attempts.
type GiveBackRequest struct {
	Held
	Reason string `json:"reason"`
}

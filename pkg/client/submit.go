package client

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jobgate/jobgate/internal/canon"
	"net/http"
	"time"

	"github.com/jobgate/jobgate/pkg/api"
)

// Submission is the outcome of Submit, SubmitBatch or Resume.
type Submission struct {
	// Job is the job of a Submit; Batch, instead, the batch of a
	// SubmitBatch (with every job).
	Job   *api.Resource
	Batch *api.Batch
	// Key is the idempotency key used (the caller's, the journal's or a new
	// one). Do not log it.
	Key string
	// Reused says the key came from an earlier, unfinished submission of
	// the same request in the journal (e.g. one interrupted by a crash).
	Reused bool
	// Replayed says the server already had the job (Idempotent-Replayed).
	Replayed bool
	// Attempts is the number of HTTP attempts this call made.
	Attempts int
}

// SubmitOption adjusts one Submit.
type SubmitOption func(*submitOptions)

type submitOptions struct {
	key    string
	fresh  bool
	notify string // SubmitBatch only
	// confirmPermanent: Admin.Retry only (WithConfirmPermanent).
	confirmPermanent bool
	flow             flow // Submit only (flow.go)
}

// WithKey makes Submit use the caller's own idempotency key (1–255
// printable ASCII). The journal refuses a key it holds for a different
// request.
func WithKey(key string) SubmitOption { return func(o *submitOptions) { o.key = key } }

// WithFreshKey makes Submit start a new logical request even when an
// identical one is still unfinished in the journal (a deliberate second job).
func WithFreshKey() SubmitOption { return func(o *submitOptions) { o.fresh = true } }

// WithConfirmPermanent makes Admin.Retry retry a job that failed
// permanently (its error not retryable) all the same; without it such a
// retry is a *ProblemError matching api.ErrPermanentFailure. A bulk retry
// says so in its request (api.AdminBulkRequest.ConfirmPermanent).
func WithConfirmPermanent() SubmitOption { return func(o *submitOptions) { o.confirmPermanent = true } }

// NotConfirmedError is a submission without a definitive answer. Its key is
// journaled; a repeated identical Submit or Resume finishes it.
type NotConfirmedError struct {
	Journaled bool
	// Key is the request's idempotency key: the same request again with
	// WithKey(Key) finishes it and makes no second job (Submit also keeps
	// it in the journal when there is one). Do not log it.
	Key string
	Err error
}

func (e *NotConfirmedError) Error() string {
	if e.Journaled {
		return "submission not confirmed; its key is kept in the journal, so running the same submit again resumes it: " + e.Err.Error()
	}
	return "submission not confirmed: " + e.Err.Error()
}

// Unwrap exposes the cause.
func (e *NotConfirmedError) Unwrap() error { return e.Err }

// Is matches ErrNotConfirmed.
func (e *NotConfirmedError) Is(target error) bool { return target == ErrNotConfirmed }

var keyEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewKey returns a new random idempotency key.
func NewKey() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return "jg-" + keyEncoding.EncodeToString(b[:])
}

// Fingerprint returns the journal's identity of a request body: the hex
// SHA-256 of its canonical form (RFC 8785), so key order, white space and
// 63 vs 63.0 do not change it. It works for any job type; unlike the
// server's fingerprint it does not apply the type's defaults, which only
// the server knows (for a body that spells out every param the two are the
// same). A body without a canonical form falls back to a digest of its
// bytes.
func Fingerprint(body []byte) string {
	if canon, err := canon.Canonicalize(body); err == nil {
		sum := sha256.Sum256(canon)
		return hex.EncodeToString(sum[:])
	}
	sum := sha256.Sum256(body)
	return "raw:" + hex.EncodeToString(sum[:])
}

func encodeRequest(typ string, params any, f flow) ([]byte, error) {
	if params == nil {
		params = map[string]any{}
	}
	body, err := json.Marshal(struct {
		Type   string `json:"type"`
		Params any    `json:"params"`
		flow
	}{typ, params, f})
	if err != nil {
		return nil, fmt.Errorf("encode params: %w", err)
	}
	return body, nil
}

// Submit asks for a job of type typ with params (anything that marshals to
// a JSON object). The idempotency key is chosen once — the caller's
// (WithKey), the one of an unfinished identical submission in the journal,
// or a new one — and journaled before the first attempt; every retry uses
// it. A 409 is a *ConflictError, a 422 a *ValidationError, other problems a
// *ProblemError; without a definitive answer the error matches
// ErrNotConfirmed and the entry stays for a later Submit or Resume.
// WithRunAt, WithDelay, WithPriority and WithStartBy set the job's flow
// fields.
func (c *Client) Submit(ctx context.Context, typ string, params any, opts ...SubmitOption) (*Submission, error) {
	var o submitOptions
	for _, f := range opts {
		f(&o)
	}
	if o.key != "" && !api.ValidKey(o.key) {
		return nil, fmt.Errorf("%w: must be 1-255 printable ASCII characters", api.ErrKeyInvalid)
	}
	body, err := encodeRequest(typ, params, o.flow)
	if err != nil {
		return nil, err
	}
	now := c.clock.Now().UTC()
	e := &Entry{
		Key: o.key, Scope: c.scope, Type: typ, Body: body, Fingerprint: Fingerprint(body),
		State: EntryPending, CreatedAt: now, UpdatedAt: now,
	}
	if e.Key == "" {
		e.Key = NewKey()
	}
	reused := false
	if c.journal != nil {
		if e, reused, err = c.journal.claim(e, o.key != "", o.fresh); err != nil {
			return nil, err
		}
	}
	if reused {
		c.log.Info("resuming unfinished submission", "key_hash", keyTag(e.Key), "job_id", e.JobID, "since", e.CreatedAt)
	}
	return c.post(ctx, e, reused)
}

// post sends the entry's request with its key until a definitive answer.
func (c *Client) post(ctx context.Context, e *Entry, reused bool) (*Submission, error) {
	hdr := http.Header{"Idempotency-Key": {e.Key}}
	path := "/v1/jobs"
	if e.Path == batchesPath {
		path = batchesPath
	}
	resp, attempts, err := c.send(ctx, &request{
		method: http.MethodPost, path: path, header: hdr, body: e.Body, keyHash: keyTag(e.Key),
	})
	if err != nil {
		return nil, &NotConfirmedError{Journaled: c.journal != nil, Key: e.Key, Err: err}
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated, http.StatusAccepted:
		replayed := resp.Header.Get("Idempotent-Replayed") == "true"
		if path == batchesPath {
			b, err := decodeBatch(resp)
			if err != nil {
				return nil, &NotConfirmedError{Journaled: c.journal != nil, Key: e.Key, Err: err}
			}
			if c.journal != nil {
				if err := c.journal.recordID(e.Key, b.ID, "", b.Done); err != nil {
					c.log.Warn("journal not updated", "batch_id", b.ID, "err", err)
				}
			}
			return &Submission{Batch: b, Key: e.Key, Reused: reused, Replayed: replayed, Attempts: attempts}, nil
		}
		res, err := decodeResource(resp)
		if err != nil {
			return nil, &NotConfirmedError{Journaled: c.journal != nil, Key: e.Key, Err: err}
		}
		if c.journal != nil {
			if err := c.journal.record(e.Key, res); err != nil {
				// The job exists and the caller gets it; an unrecorded
				// answer only means a rerun replays it once more.
				c.log.Warn("journal not updated", "job_id", res.ID, "err", err)
			}
		}
		return &Submission{Job: res, Key: e.Key, Reused: reused, Replayed: replayed, Attempts: attempts}, nil
	}
	perr := problemFrom(resp, c.clock.Now())
	if definitiveRefusal(resp.StatusCode) && c.journal != nil {
		if err := c.journal.forget(e.Key); err != nil {
			c.log.Warn("journal entry not removed", "key_hash", keyTag(e.Key), "err", err)
		}
		return nil, perr
	}
	// 401, 403 and anything unforeseen: the key stays journaled. A token
	// that expired between a committed attempt and its retry must not
	// cost the user their job; the rerun with a fresh token reuses it.
	return nil, &NotConfirmedError{Journaled: c.journal != nil, Key: e.Key, Err: perr}
}

// definitiveRefusal lists the statuses after which the key is of no further
// use: the request itself is wrong, or the key belongs to another request.
func definitiveRefusal(code int) bool {
	switch code {
	case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge,
		http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// Pending lists this identity's unfinished journaled submissions: those
// without an answer yet and those whose job was not seen finished.
func (c *Client) Pending(ctx context.Context) ([]Entry, error) {
	if c.journal == nil {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	all, err := c.journal.Entries(c.scope)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, e := range all {
		if e.open() {
			out = append(out, e)
		}
	}
	return out, nil
}

// Resume re-sends every unfinished journaled submission of this identity
// with its own key, so a process restarted after a crash gets exactly the
// jobs it had asked for. It returns what it resolved and the errors of what
// it could not (those stay journaled unless refused).
func (c *Client) Resume(ctx context.Context) ([]*Submission, error) {
	pending, err := c.Pending(ctx)
	if err != nil {
		return nil, err
	}
	var (
		out  []*Submission
		errs []error
	)
	for i := range pending {
		e := &pending[i]
		s, err := c.post(ctx, e, true)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s request of %s: %w", e.Type, e.CreatedAt.Format(time.RFC3339), err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}

// observe tells the journal a job was seen; terminal jobs finish their
// entry. A journal that cannot be written does not fail the read.
func (c *Client) observe(res *api.Resource) {
	if c.journal == nil || res == nil || !res.State.Terminal() {
		return
	}
	if err := c.journal.observe(res); err != nil {
		c.log.Warn("journal not updated", "job_id", res.ID, "err", err)
	}
}

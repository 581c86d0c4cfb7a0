// Package endpoint is the handler side of jobgate's endpoint types
// (docs/endpoints.md): a team that runs no worker process declares a type
// whose attempts jobgate POSTs to an HTTP handler of theirs. This package
// verifies such a request's Standard Webhooks signature (with a timestamp
// tolerance against replays), decodes the attempt, and answers it: a
// result, no result, a refusal with a problem document (the job fails,
// not retried, with its detail as the owner's message), or "retry later".
// It links neither NATS nor any of jobgate's services: a web app imports
// it beside its own routes.
//
//	v, _ := endpoint.NewVerifier(os.Getenv("JOBGATE_ENDPOINT_SECRET"))
//	http.Handle("/jobs/thumbnail", endpoint.Handler(v, func(ctx context.Context, a *endpoint.Attempt) endpoint.Answer {
//		var p struct{ URL string `json:"url"` }
//		if err := json.Unmarshal(a.Params, &p); err != nil {
//			return endpoint.Reject("params do not fit: " + err.Error())
//		}
//		png, err := thumbnail(ctx, p.URL)
//		if err != nil {
//			return endpoint.RetryLater(30 * time.Second)
//		}
//		return endpoint.Result(png)
//	}))
package endpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/jobgate/jobgate/internal/stdwebhook"
)

// Attempt is one attempt of a job, as jobgate sends it (the request's
// "job" member).
type Attempt struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Tenant    string `json:"tenant"`
	Requester string `json:"requester"`
	// Attempt is this attempt's number, from 1; Attempts is how many the
	// job gets.
	Attempt   int       `json:"attempt"`
	Attempts  int       `json:"attempts"`
	CreatedAt time.Time `json:"created_at"`
	// Params are the job's params, validated against the type's schema
	// with its defaults applied.
	Params json.RawMessage `json:"params"`
	// Deadline is when jobgate stops waiting for the answer: the
	// attempt's time budget ends.
	Deadline time.Time `json:"deadline"`
}

// Request is the body of a request jobgate sends.
type Request struct {
	Job Attempt `json:"job"`
	// Callback, when set, is the attempt's callback URL.
	Callback string `json:"callback,omitempty"`
}

// Headers of a request (Standard Webhooks); webhook-id is
// "<job id>.a<attempt>".
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// ErrUnverified is the error of Verify (and Decode) for a request whose
// signature headers are missing, whose timestamp is outside the
// tolerance, or whose signatures match none of the secrets; its text
// says which.
var ErrUnverified = errors.New("endpoint: request not signed by jobgate")

// DefaultTolerance is how far a request's timestamp may be from the
// handler's clock (Standard Webhooks' default).
const DefaultTolerance = 5 * time.Minute

// MaxRequestBytes bounds the body Decode reads (jobgate's are far
// smaller: params are at most 64 KiB).
const MaxRequestBytes = 1 << 20

// Verifier checks requests against an endpoint type's secrets.
type Verifier struct {
	keys [][]byte
	// Tolerance is how far the timestamp may be from Now. Default
	// DefaultTolerance.
	Tolerance time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// NewVerifier returns a verifier of the secrets ("whsec_<base64>", as PUT
// /v1/admin/types/{name} and rotate-secret answer them): a request signed
// by any of them passes, so a handler may accept the new secret before
// the old one is dropped.
func NewVerifier(secrets ...string) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("endpoint: a secret is required")
	}
	v := &Verifier{}
	for _, s := range secrets {
		key, err := stdwebhook.DecodeSecret(s)
		if err != nil {
			return nil, fmt.Errorf("endpoint: %w", err)
		}
		v.keys = append(v.keys, key)
	}
	return v, nil
}

// Verify checks the signature headers h of body.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	now, tol := time.Now(), v.Tolerance
	if v.Now != nil {
		now = v.Now()
	}
	if tol == 0 {
		tol = DefaultTolerance
	}
	var err error
	for _, k := range v.keys {
		err = stdwebhook.Verify(k, h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature), body, now, tol)
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: %w", ErrUnverified, err)
}

// Decode reads r's body (at most MaxRequestBytes), verifies it and
// decodes the attempt.
func (v *Verifier) Decode(r *http.Request) (*Request, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("endpoint: read the request: %w", err)
	}
	if len(body) > MaxRequestBytes {
		return nil, fmt.Errorf("endpoint: the request is larger than %d bytes", MaxRequestBytes)
	}
	if err := v.Verify(r.Header, body); err != nil {
		return nil, err
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("endpoint: decode the request: %w", err)
	}
	if req.Job.ID == "" || req.Job.Attempt < 1 {
		return nil, errors.New("endpoint: the request names no job attempt")
	}
	return &req, nil
}

// Answer is a handler's answer to one attempt.
type Answer struct {
	status      int
	body        []byte
	contentType string
	retryAfter  time.Duration
}

// Result succeeds the job with body as its result (200); jobgate stores
// it with the type's declared content type, whatever this answer says.
func Result(body []byte) Answer { return Answer{status: http.StatusOK, body: body} }

// NoResult succeeds the job without a result (204).
func NoResult() Answer { return Answer{status: http.StatusNoContent} }

// Reject fails the job without another attempt (422 with a problem
// document): detail is what the job's owner reads (jobgate keeps 500
// bytes of it), so say what is wrong with the request, nothing internal.
func Reject(detail string) Answer {
	body, _ := json.Marshal(map[string]any{"type": "about:blank", "title": "Job rejected", "status": 422, "detail": detail})
	return Answer{status: http.StatusUnprocessableEntity, body: body, contentType: "application/problem+json"}
}

// RetryLater fails this attempt (503); jobgate tries again after the
// type's backoff, and not before after (0: the backoff alone).
func RetryLater(after time.Duration) Answer {
	return Answer{status: http.StatusServiceUnavailable, retryAfter: after}
}

// Status is the HTTP status the answer is sent with.
func (a Answer) Status() int { return a.status }

// Write sends the answer.
func (a Answer) Write(w http.ResponseWriter) {
	if a.contentType != "" {
		w.Header().Set("Content-Type", a.contentType)
	}
	if a.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((a.retryAfter+time.Second-1)/time.Second), 10))
	}
	w.WriteHeader(a.status)
	if len(a.body) > 0 {
		_, _ = w.Write(a.body)
	}
}

// Handler serves jobgate's requests of one endpoint type: it verifies and
// decodes each, refusing a request not signed with v's secrets (401, which
// fails the attempt) or not jobgate's (400), and answers what fn returns.
// fn's ctx ends when jobgate gives up the attempt: the job was canceled,
// or its time budget ran out.
func Handler(v *Verifier, fn func(ctx context.Context, a *Attempt) Answer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			problem(w, http.StatusMethodNotAllowed, "jobgate sends POST requests")
			return
		}
		req, err := v.Decode(r)
		switch {
		case errors.Is(err, ErrUnverified):
			problem(w, http.StatusUnauthorized, "the request is not signed with this endpoint's secret")
			return
		case err != nil:
			problem(w, http.StatusBadRequest, "the request is not a jobgate attempt")
			return
		}
		ctx := r.Context()
		if !req.Job.Deadline.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, req.Job.Deadline)
			defer cancel()
		}
		fn(ctx, &req.Job).Write(w)
	})
}

func problem(w http.ResponseWriter, status int, detail string) {
	body, _ := json.Marshal(map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// NewTestRequest is a request as jobgate sends attempt a to url, signed
// with secret at now: for a handler's tests.
func NewTestRequest(secret, url string, a Attempt, now time.Time) (*http.Request, error) {
	key, err := stdwebhook.DecodeSecret(secret)
	if err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	body, err := json.Marshal(Request{Job: a})
	if err != nil {
		return nil, err
	}
	r, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	id := a.ID + ".a" + strconv.Itoa(a.Attempt)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(HeaderID, id)
	r.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	r.Header.Set(HeaderSignature, stdwebhook.Sign(key, id, now.Unix(), body))
	return r, nil
}

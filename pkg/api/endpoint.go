package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Failure categories of endpoint types (docs/endpoints.md): the handler
// refused the attempt (a 4xx other than 408, 425 and 429; not retried), or
// it could not be reached or answered in error (retried).
const (
	CategoryEndpointRejected = "endpoint_rejected"
	CategoryEndpointError    = "endpoint_error"
)

// ErrTypeNameTaken: an operator's declaration of an endpoint type whose
// name a worker credential (or jobgate itself) owns.
var ErrTypeNameTaken = errors.New("job type name taken")

// ErrAttemptLost: a callback of an asynchronous endpoint attempt that is
// no longer the job's current one (it ended, timed out, was taken over or
// canceled). Its problem says "canceled": true when the owner canceled.
var ErrAttemptLost = errors.New("attempt lost")

// AttemptLostError is an attempt-lost refusal; it matches ErrAttemptLost.
type AttemptLostError struct {
	// Canceled says the job's owner canceled it.
	Canceled bool
}

func (e *AttemptLostError) Error() string {
	if e.Canceled {
		return "attempt lost: the job was canceled"
	}
	return "attempt lost"
}

// Is makes an AttemptLostError match ErrAttemptLost.
func (e *AttemptLostError) Is(target error) bool { return target == ErrAttemptLost }

// Endpoint is where jobgate sends the attempts of an endpoint type, and
// how many at once.
type Endpoint struct {
	// URL receives each attempt as a signed POST.
	URL string `json:"url"`
	// Concurrency bounds the requests in flight for the type.
	Concurrency int `json:"concurrency"`
	// RatePerSecond bounds the requests started a second; 0: no bound.
	RatePerSecond float64 `json:"rate_per_second,omitempty"`
}

// Bounds and defaults of an endpoint.
const (
	DefaultEndpointConcurrency = 10
	MaxEndpointConcurrency     = 1000
	MaxEndpointRate            = 10000
	MaxEndpointURLLen          = 2048
)

// Validate checks the endpoint's own fields; the URL's address rules are
// the deployment's (JOBGATE_ENDPOINT_ALLOW) and checked where it is known.
func (e *Endpoint) Validate() error {
	var errs []error
	if e.URL == "" || len(e.URL) > MaxEndpointURLLen {
		errs = append(errs, fmt.Errorf("endpoint url must be 1 to %d bytes", MaxEndpointURLLen))
	}
	if e.Concurrency < 1 || e.Concurrency > MaxEndpointConcurrency {
		errs = append(errs, fmt.Errorf("endpoint concurrency must be 1 to %d, got %d", MaxEndpointConcurrency, e.Concurrency))
	}
	if e.RatePerSecond < 0 || e.RatePerSecond > MaxEndpointRate {
		errs = append(errs, fmt.Errorf("endpoint rate_per_second must be 0 to %d, got %g", MaxEndpointRate, e.RatePerSecond))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidType, err)
	}
	return nil
}

// EndpointType is the body of PUT /v1/admin/types/{name}: an endpoint
// type's declaration. Zero limits take the worker declaration's defaults
// (DefaultTimeout, DefaultAttempts, DefaultMaxResultBytes,
// application/octet-stream).
type EndpointType struct {
	Description    string          `json:"description,omitempty"`
	Schema         json.RawMessage `json:"schema"`
	TimeoutSeconds int             `json:"timeout_seconds,omitempty"`
	Attempts       int             `json:"attempts,omitempty"`
	MaxResultBytes int64           `json:"max_result_bytes,omitempty"`
	ContentType    string          `json:"content_type,omitempty"`
	Endpoint       EndpointRequest `json:"endpoint"`
	// Flow: the type's retry policy, concurrency keys and rate limit, as
	// a worker declares them.
	Flow
}

// EndpointRequest is the endpoint part of PUT /v1/admin/types/{name}.
type EndpointRequest struct {
	URL           string  `json:"url"`
	Concurrency   int     `json:"concurrency,omitempty"`
	RatePerSecond float64 `json:"rate_per_second,omitempty"`
}

// EndpointTypeResource is the answer of PUT /v1/admin/types/{name}: the
// declaration as stored, with the signing secret on creation only.
type EndpointTypeResource struct {
	TypeDecl
	// DeclaredAt is when this version of the declaration was written: a
	// declaration sent again unchanged keeps it.
	DeclaredAt time.Time    `json:"declared_at"`
	Endpoint   EndpointView `json:"endpoint"`
	Paused     bool         `json:"paused"`
}

// EndpointView is an endpoint as the admin API shows it; Secret only in
// the answer that created the type.
type EndpointView struct {
	Endpoint
	Secret string `json:"secret,omitempty"`
}

// EndpointSecret is the answer of POST /v1/admin/types/{name}/rotate-secret.
type EndpointSecret struct {
	Secret string `json:"secret"`
}

package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/retry"
)

// RetryPolicy bounds how the client retries a request whose outcome is
// unknown or transient: exponential backoff with full jitter, capped,
// never earlier than the server's Retry-After, within a total time budget.
type RetryPolicy struct {
	// BaseDelay is the backoff before the first retry (before jitter).
	BaseDelay time.Duration
	// MaxDelay caps the exponential backoff. A longer Retry-After from the
	// server is still honoured (within MaxElapsed).
	MaxDelay time.Duration
	// MaxElapsed is the retry budget: the time from a call's first attempt
	// to the start of its last one. A wait that would overshoot it is cut
	// short, so the last attempt starts at the deadline (and may take up to
	// AttemptTimeout more); a server's Retry-After longer than what is left
	// ends the call at once.
	MaxElapsed time.Duration
	// MaxAttempts bounds the number of attempts; 0 means only MaxElapsed
	// bounds them.
	MaxAttempts int
	// AttemptTimeout bounds one attempt until its response headers (and,
	// for small JSON answers, its body) arrived.
	AttemptTimeout time.Duration
	// Rand returns a number in [0,1) for the jitter (default math/rand/v2).
	Rand func() float64
}

// DefaultRetryPolicy is what New uses.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		BaseDelay:      250 * time.Millisecond,
		MaxDelay:       15 * time.Second,
		MaxElapsed:     2 * time.Minute,
		AttemptTimeout: 30 * time.Second,
	}
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy()
	if p.BaseDelay <= 0 {
		p.BaseDelay = d.BaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = d.MaxDelay
	}
	if p.MaxElapsed <= 0 {
		p.MaxElapsed = d.MaxElapsed
	}
	if p.AttemptTimeout <= 0 {
		p.AttemptTimeout = d.AttemptTimeout
	}
	if p.Rand == nil {
		p.Rand = rand.Float64
	}
	return p
}

// Backoff is the delay before retry number n (0 = the first retry): a
// uniformly random duration in [0, min(MaxDelay, BaseDelay·2ⁿ)) — "full
// jitter", which spreads a crowd of clients that failed together — but never
// shorter than the server's Retry-After.
func (p RetryPolicy) Backoff(n int, retryAfter time.Duration) time.Duration {
	return retry.NotBefore(retry.FullJitter(retry.Exponential(p.BaseDelay, p.MaxDelay, n), p.Rand), retryAfter, 0)
}

// retryableStatus reports whether a status says "try again later": the
// request was not processed, or its outcome is unknown and the idempotency
// key (or the method) makes repeating it safe.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	case http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return false
	}
	return code >= 500
}

// retryableErr reports whether a transport error may be transient
// (refused, reset, timed out, cut off). Certificate problems and malformed
// URLs will not heal by retrying.
func retryableErr(err error) bool {
	var ue *url.Error
	if errors.As(err, &ue) && (ue.Op == "parse") {
		return false
	}
	var (
		uae x509.UnknownAuthorityError
		hne x509.HostnameError
		cie x509.CertificateInvalidError
		rhe tls.RecordHeaderError
		cve *tls.CertificateVerificationError
	)
	if errors.As(err, &uae) || errors.As(err, &hne) || errors.As(err, &cie) || errors.As(err, &rhe) || errors.As(err, &cve) {
		return false
	}
	return !strings.Contains(err.Error(), "unsupported protocol scheme")
}

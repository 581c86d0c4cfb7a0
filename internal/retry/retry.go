// Package retry holds the pieces of a retry schedule that the HTTP client
// (pkg/client), the notifier's webhook and mail deliveries, the workers and
// the services' JetStream set-up share: exponential growth, jitter, the
// receiver's Retry-After header, which a delay never undercuts, and Until,
// the loop around an operation that may fail for a while.
package retry

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Exponential is base·2ⁿ, capped at limit (n = 0 gives base).
func Exponential(base, limit time.Duration, n int) time.Duration {
	if n < 0 {
		n = 0
	}
	if n < 40 {
		if b := base << n; b > 0 && b < limit {
			return b
		}
	}
	return limit
}

// FullJitter is a uniformly random duration in [0, d): spread this way, a
// crowd of clients that failed together does not come back together. rnd
// returns a number in [0, 1).
func FullJitter(d time.Duration, rnd func() float64) time.Duration {
	return time.Duration(rnd() * float64(d))
}

// Spread is d moved uniformly by up to ± frac of itself (0 ≤ frac ≤ 1).
func Spread(d time.Duration, frac float64, rnd func() float64) time.Duration {
	j := float64(d) * frac
	if j <= 0 {
		return d
	}
	return time.Duration(float64(d) - j + rnd()*2*j)
}

// NotBefore is d, or the server's Retry-After (capped at limit; 0 means no
// cap) when that is longer: a retry never comes earlier than the server
// asked.
func NotBefore(d, retryAfter, limit time.Duration) time.Duration {
	if limit > 0 {
		retryAfter = min(retryAfter, limit)
	}
	return max(d, retryAfter)
}

// ParseRetryAfter reads a Retry-After value, delay-seconds or an HTTP date
// (relative to now); 0 when absent, malformed or in the past.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// After reads the Retry-After header of h (see ParseRetryAfter).
func After(h http.Header, now time.Time) time.Duration {
	return ParseRetryAfter(h.Get("Retry-After"), now)
}

// Policy shapes Until: waits from First doubling to Limit, each spread by
// ±50% (so processes that failed together do not come back together), and
// each try bounded by Try (0: only by ctx).
type Policy struct {
	First, Limit, Try time.Duration
	// Retryable says whether an error is worth another try; nil: every one.
	Retryable func(error) bool
	// After, if set, is the least wait an error asks for before the next
	// try (a server's Retry-After), 0 for none; the wait is the longer of
	// it and the backoff's.
	After func(error) time.Duration
}

// Until runs op until it succeeds, fails for good or ctx ends, and returns
// op's last error. A deadline on ctx bounds the whole.
func Until(ctx context.Context, p Policy, op func(context.Context) error) error {
	for n := 0; ; n++ {
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if p.Try > 0 {
			tctx, cancel = context.WithTimeout(ctx, p.Try)
		}
		err := op(tctx)
		cancel()
		if err == nil || ctx.Err() != nil || (p.Retryable != nil && !p.Retryable(err)) {
			return err
		}
		wait := Spread(Exponential(p.First, p.Limit, n), 0.5, rand.Float64)
		if p.After != nil {
			wait = max(wait, p.After(err))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

package api

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Flow is a type's flow control, declared with it (the worker protocol's
// declare, PUT /v1/admin/types/{name}): how its failed attempts are spaced,
// how many of its jobs with the same key run at once, and how many of its
// attempts start a second. Each limit holds across every dispatcher of the
// deployment; a changed policy applies to the attempts not started yet.
// Declarations are untrusted input, so every value is bounded (Check).
type Flow struct {
	// Retry spaces the attempts after a failure; nil: the defaults.
	Retry *RetryPolicy `json:"retry,omitempty"`
	// Concurrency bounds the jobs running at once per key value.
	Concurrency []ConcurrencyKey `json:"concurrency,omitempty"`
	// RateLimit bounds the attempts started a second.
	RateLimit *RateLimit `json:"rate_limit,omitempty"`
}

// RetryPolicy is the pause before the attempt after attempt n (from 1):
// a uniformly random duration in [0, min(max, initial·multiplierⁿ⁻¹))
// ("full jitter"), so that the jobs a partner's outage failed together do
// not come back together. A zero field takes its default.
type RetryPolicy struct {
	InitialSeconds float64 `json:"initial_seconds,omitempty"`
	MaxSeconds     float64 `json:"max_seconds,omitempty"`
	Multiplier     float64 `json:"multiplier,omitempty"`
}

// ConcurrencyKey bounds how many jobs of the type with the same value of
// Key run at once: Key is "tenant", "requester" or a JSON Pointer into the
// job's params starting "/params/" (a job whose params lack it counts under
// the value null).
type ConcurrencyKey struct {
	Key   string `json:"key"`
	Limit int    `json:"limit"`
}

// RateLimit bounds the attempts of the type started a second, as a token
// bucket of Burst tokens refilled at PerSecond, one bucket for the whole
// type (Key "type", the default) or one per tenant (Key "tenant").
type RateLimit struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst,omitempty"`
	Key       string  `json:"key,omitempty"`
}

// Defaults and bounds of the flow fields.
const (
	DefaultRetryInitial    = 30 * time.Second
	DefaultRetryMax        = time.Hour
	DefaultRetryMultiplier = 2.0
	MinRetryInitial        = 100 * time.Millisecond
	MaxRetryDelay          = 24 * time.Hour
	MaxRetryMultiplier     = 10.0
	// MaxConcurrencyKeys bounds the entries of a type's concurrency: each
	// costs a compare-and-set a start.
	MaxConcurrencyKeys  = 4
	MaxConcurrencyLimit = 1000
	// MaxKeyPointerLen bounds a concurrency key's JSON Pointer.
	MaxKeyPointerLen = 256
	MinRatePerSecond = 0.05
	MaxRatePerSecond = 10000.0
	// RateRefillSeconds: a full bucket refills within this long, so that
	// a bucket idle long enough to be forgotten (its entry's age limit,
	// 25 s) was full anyway.
	RateRefillSeconds = 20
)

// Concurrency key classes and rate limit keys.
const (
	KeyTenant    = "tenant"
	KeyRequester = "requester"
	KeyType      = "type"
	// KeyParamsPrefix starts a concurrency key read from the params.
	KeyParamsPrefix = "/params/"
)

// Delay is the pause before the attempt after attempt n (from 1), given a
// number in [0, 1) from rnd.
func (p *RetryPolicy) Delay(n int, rnd func() float64) time.Duration {
	return FullJitterDelay(p.Initial(), p.Max(), p.Mult(), n, rnd)
}

// Initial, Max and Mult are the policy's fields with their defaults (p may
// be nil).
func (p *RetryPolicy) Initial() time.Duration {
	if p == nil || p.InitialSeconds == 0 {
		return DefaultRetryInitial
	}
	return seconds(p.InitialSeconds)
}

// Max is the longest pause (see Initial).
func (p *RetryPolicy) Max() time.Duration {
	if p == nil || p.MaxSeconds == 0 {
		return max(DefaultRetryMax, p.Initial())
	}
	return seconds(p.MaxSeconds)
}

// Mult is the growth of the pause per attempt (see Initial).
func (p *RetryPolicy) Mult() float64 {
	if p == nil || p.Multiplier == 0 {
		return DefaultRetryMultiplier
	}
	return p.Multiplier
}

// FullJitterDelay is a uniformly random duration in
// [0, min(limit, initial·multⁿ⁻¹)).
func FullJitterDelay(initial, limit time.Duration, mult float64, n int, rnd func() float64) time.Duration {
	ceil := float64(initial) * math.Pow(mult, float64(max(n, 1)-1))
	if ceil > float64(limit) || math.IsInf(ceil, 0) || math.IsNaN(ceil) {
		ceil = float64(limit)
	}
	return time.Duration(rnd() * ceil)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Check bounds every flow field; nil when they hold.
func (f *Flow) Check() error {
	var errs []error
	if p := f.Retry; p != nil {
		if p.InitialSeconds != 0 && (seconds(p.InitialSeconds) < MinRetryInitial || seconds(p.InitialSeconds) > MaxRetryDelay) || math.IsNaN(p.InitialSeconds) {
			errs = append(errs, fmt.Errorf("retry.initial_seconds must be %g to %g, got %g", MinRetryInitial.Seconds(), MaxRetryDelay.Seconds(), p.InitialSeconds))
		}
		if p.MaxSeconds != 0 && (seconds(p.MaxSeconds) < p.Initial() || seconds(p.MaxSeconds) > MaxRetryDelay) || math.IsNaN(p.MaxSeconds) {
			errs = append(errs, fmt.Errorf("retry.max_seconds must be initial_seconds (%g) to %g, got %g", p.Initial().Seconds(), MaxRetryDelay.Seconds(), p.MaxSeconds))
		}
		if p.Multiplier != 0 && (p.Multiplier < 1 || p.Multiplier > MaxRetryMultiplier) || math.IsNaN(p.Multiplier) {
			errs = append(errs, fmt.Errorf("retry.multiplier must be 1 to %g, got %g", MaxRetryMultiplier, p.Multiplier))
		}
	}
	if len(f.Concurrency) > MaxConcurrencyKeys {
		errs = append(errs, fmt.Errorf("concurrency holds %d entries, at most %d", len(f.Concurrency), MaxConcurrencyKeys))
	} else {
		seen := map[string]bool{}
		for i, c := range f.Concurrency {
			if err := CheckConcurrencyKey(c.Key); err != nil {
				errs = append(errs, fmt.Errorf("concurrency[%d].key: %w", i, err))
			} else if seen[c.Key] {
				errs = append(errs, fmt.Errorf("concurrency[%d].key %q is declared twice", i, c.Key))
			}
			seen[c.Key] = true
			if c.Limit < 1 || c.Limit > MaxConcurrencyLimit {
				errs = append(errs, fmt.Errorf("concurrency[%d].limit must be 1 to %d, got %d", i, MaxConcurrencyLimit, c.Limit))
			}
		}
	}
	if r := f.RateLimit; r != nil {
		if !(r.PerSecond >= MinRatePerSecond && r.PerSecond <= MaxRatePerSecond) {
			errs = append(errs, fmt.Errorf("rate_limit.per_second must be %g to %g, got %g", MinRatePerSecond, MaxRatePerSecond, r.PerSecond))
		} else if top := r.MaxBurst(); r.Burst < 0 || r.Burst > top {
			errs = append(errs, fmt.Errorf("rate_limit.burst must be 1 to %d (what %g a second refill in %d s), got %d", top, r.PerSecond, RateRefillSeconds, r.Burst))
		}
		if r.Key != "" && r.Key != KeyType && r.Key != KeyTenant {
			errs = append(errs, fmt.Errorf("rate_limit.key must be %q or %q, got %q", KeyType, KeyTenant, clipKey(r.Key)))
		}
	}
	return errors.Join(errs...)
}

// MaxBurst is the largest burst the rate allows: what it refills in
// RateRefillSeconds, at least 1.
func (r *RateLimit) MaxBurst() int {
	return max(1, int(min(r.PerSecond*RateRefillSeconds, MaxRatePerSecond)))
}

// BurstOr is the burst with its default: one second's worth, at least 1.
func (r *RateLimit) BurstOr() int {
	if r.Burst > 0 {
		return r.Burst
	}
	return max(1, int(r.PerSecond))
}

// KeyOr is the rate limit's key with its default ("type").
func (r *RateLimit) KeyOr() string {
	if r.Key == "" {
		return KeyType
	}
	return r.Key
}

// CheckConcurrencyKey checks a concurrency key: "tenant", "requester" or
// "/params/" and a JSON Pointer (RFC 6901: "~" only as "~0" or "~1") of at
// most MaxKeyPointerLen bytes.
func CheckConcurrencyKey(k string) error {
	switch {
	case k == KeyTenant || k == KeyRequester:
		return nil
	case !strings.HasPrefix(k, KeyParamsPrefix) || len(k) == len(KeyParamsPrefix):
		return fmt.Errorf("must be %q, %q or a JSON Pointer into the params (\"/params/...\"), got %q", KeyTenant, KeyRequester, clipKey(k))
	case len(k) > MaxKeyPointerLen:
		return fmt.Errorf("a JSON Pointer of at most %d bytes, got %d", MaxKeyPointerLen, len(k))
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("holds a control character at %d", i)
		}
		if k[i] == '~' && (i+1 == len(k) || (k[i+1] != '0' && k[i+1] != '1')) {
			return fmt.Errorf("%q: \"~\" must be followed by 0 or 1 (RFC 6901)", clipKey(k))
		}
	}
	return nil
}

func clipKey(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

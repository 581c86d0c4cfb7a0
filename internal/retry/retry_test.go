package retry_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/retry"
	"github.com/stretchr/testify/require"
)

func TestExponential(t *testing.T) {
	t.Parallel()
	for n, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		require.Equal(t, want, retry.Exponential(time.Second, 5*time.Second, n), "n=%d", n)
	}
	require.Equal(t, 5*time.Second, retry.Exponential(time.Second, 5*time.Second, 1000), "no overflow")
}

func TestJitter(t *testing.T) {
	t.Parallel()
	lo, hi := func() float64 { return 0 }, func() float64 { return 0.999999 }
	require.Zero(t, retry.FullJitter(time.Second, lo))
	require.InDelta(t, float64(time.Second), float64(retry.FullJitter(time.Second, hi)), float64(time.Millisecond))
	require.Less(t, retry.FullJitter(time.Second, hi), time.Second)
	require.Equal(t, 8*time.Second, retry.Spread(10*time.Second, 0.2, lo))
	require.InDelta(t, float64(12*time.Second), float64(retry.Spread(10*time.Second, 0.2, hi)), float64(time.Millisecond))
	require.Equal(t, 10*time.Second, retry.Spread(10*time.Second, 0, hi))
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	require.Equal(t, 7*time.Second, retry.ParseRetryAfter(" 7 ", now))
	require.Zero(t, retry.ParseRetryAfter("-3", now))
	require.Zero(t, retry.ParseRetryAfter("soon", now))
	require.Zero(t, retry.ParseRetryAfter("", now))
	date := now.Add(90 * time.Second).Format(http.TimeFormat)
	require.Equal(t, 90*time.Second, retry.After(http.Header{"Retry-After": {date}}, now))
	require.Zero(t, retry.ParseRetryAfter(now.Add(-time.Minute).Format(http.TimeFormat), now), "a date in the past")

	require.Equal(t, 3*time.Second, retry.NotBefore(time.Second, 3*time.Second, 0))
	require.Equal(t, 2*time.Second, retry.NotBefore(time.Second, time.Hour, 2*time.Second), "capped")
	require.Equal(t, 5*time.Second, retry.NotBefore(5*time.Second, time.Second, 0))
}

func TestUntil(t *testing.T) {
	t.Parallel()
	transient := errors.New("temporarily unavailable")
	final := errors.New("bad request")
	p := retry.Policy{First: time.Millisecond, Limit: 4 * time.Millisecond, Try: time.Second,
		Retryable: func(err error) bool { return errors.Is(err, transient) }}

	tries := 0
	err := retry.Until(context.Background(), p, func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("a try without its own deadline")
		}
		if tries++; tries < 4 {
			return transient
		}
		return nil
	})
	if err != nil || tries != 4 {
		t.Fatalf("transient errors: err %v after %d tries, want nil after 4", err, tries)
	}

	tries = 0
	err = retry.Until(context.Background(), p, func(context.Context) error { tries++; return final })
	if !errors.Is(err, final) || tries != 1 {
		t.Fatalf("a final error: %v after %d tries, want it after 1", err, tries)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	err = retry.Until(ctx, p, func(context.Context) error { return transient })
	if !errors.Is(err, transient) {
		t.Fatalf("at the deadline: %v, want the last error", err)
	}
}

// An error that asks for a wait (Policy.After) gets at least that wait
// before the next try, however short the backoff.
func TestUntilWaitsWhatTheErrorAsks(t *testing.T) {
	t.Parallel()
	throttled := errors.New("throttled")
	p := retry.Policy{First: time.Millisecond, Limit: time.Millisecond,
		After: func(err error) time.Duration {
			if errors.Is(err, throttled) {
				return 150 * time.Millisecond
			}
			return 0
		}}
	var tries []time.Time
	err := retry.Until(context.Background(), p, func(context.Context) error {
		if tries = append(tries, time.Now()); len(tries) < 3 {
			return throttled
		}
		return nil
	})
	require.NoError(t, err)
	require.Len(t, tries, 3)
	for i := 1; i < len(tries); i++ {
		require.GreaterOrEqual(t, tries[i].Sub(tries[i-1]), 150*time.Millisecond, "try %d", i)
	}
}

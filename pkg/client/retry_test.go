package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/stretchr/testify/require"
)

// contractServer is a minimal stand-in that speaks the contract's POST
// /v1/jobs for tests of timing the real gateway cannot be scripted into
// (429 then success, endless 503). It records when, by the test clock, each
// attempt arrived and with which key.
type contractServer struct {
	t      *testing.T
	url    string
	clk    *fakeClock
	mu     sync.Mutex
	at     []time.Time
	keys   []string
	bodies []string
	answer func(n int, w http.ResponseWriter) bool // true: answered (not a success)
}

func (s *contractServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.at = append(s.at, s.clk.Now())
	s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	s.bodies = append(s.bodies, string(body))
	n := len(s.at)
	s.mu.Unlock()
	if s.answer != nil && s.answer(n, w) {
		return
	}
	id := job.DeriveID([]byte("fake"), "4", "reviewer-47", r.Header.Get("Idempotency-Key"))
	res := job.Resource{ID: id, Type: "permit_report", Params: json.RawMessage(`{}`), State: job.StateQueued,
		CreatedAt: s.clk.Now(), UpdatedAt: s.clk.Now(), Links: job.Links{Self: job.JobPath(id)}}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", job.JobPath(id))
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(res)
}

func problem(w http.ResponseWriter, status int, slug, retryAfter string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "/problems/" + slug, "title": slug, "status": status, "detail": slug + " right now"})
}

func testToken(t *testing.T) string { return mintFor(t, "4", "reviewer-47") }

func mintFor(t *testing.T, tenant, sub string) string {
	tok, err := auth.Mint([]byte("fake"), auth.Identity{Tenant: tenant, Requester: sub}, time.Hour, time.Now())
	require.NoError(t, err)
	return tok
}

func fakeSetup(t *testing.T, answer func(n int, w http.ResponseWriter) bool, policy client.RetryPolicy) (*contractServer, *client.Client, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	cs := &contractServer{t: t, clk: clk, answer: answer}
	srv := httptest.NewServer(cs)
	t.Cleanup(srv.Close)
	cs.url = srv.URL
	c, err := client.New(srv.URL, testToken(t), client.WithClock(clk), client.WithRetryPolicy(policy),
		client.WithJournal(filepath.Join(t.TempDir(), "journal.db")))
	require.NoError(t, err)
	return cs, c, clk
}

// 429 with Retry-After: 2 — the next attempt is not earlier than 2s later,
// whatever the jitter draws, measured on the injected clock.
func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	for _, draw := range []float64{0, 0.5, 0.999} {
		cs, c, _ := fakeSetup(t, func(n int, w http.ResponseWriter) bool {
			if n == 1 {
				problem(w, http.StatusTooManyRequests, "rate-limited", "2")
				return true
			}
			return false
		}, client.RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, Rand: func() float64 { return draw }})
		sub, err := c.Submit(context.Background(), "permit_report", permit)
		require.NoError(t, err)
		require.Equal(t, 2, sub.Attempts)
		require.Len(t, cs.at, 2)
		require.GreaterOrEqual(t, cs.at[1].Sub(cs.at[0]), 2*time.Second, "draw %v", draw)
		require.Equal(t, cs.keys[0], cs.keys[1], "a retry reuses the key")
		require.Equal(t, cs.bodies[0], cs.bodies[1])
	}
}

// Retry-After as an HTTP date is honoured too.
func TestRetryAfterDate(t *testing.T) {
	t.Parallel()
	var clk *fakeClock
	cs, c, clk := fakeSetup(t, func(n int, w http.ResponseWriter) bool {
		if n == 1 {
			problem(w, http.StatusServiceUnavailable, "unavailable", clk.Now().Add(5*time.Second).Format(http.TimeFormat))
			return true
		}
		return false
	}, client.RetryPolicy{Rand: func() float64 { return 0 }})
	_, err := c.Submit(context.Background(), "permit_report", permit)
	require.NoError(t, err)
	require.GreaterOrEqual(t, cs.at[1].Sub(cs.at[0]), 5*time.Second)
}

// A server that stays unavailable: retries stop within the time budget,
// all with one key; the error says unconfirmed and why; the entry stays
// and the next identical submission resumes it.
func TestRetryBudgetAndResume(t *testing.T) {
	t.Parallel()
	down := true
	var mu sync.Mutex
	cs, c, clk := fakeSetup(t, func(n int, w http.ResponseWriter) bool {
		mu.Lock()
		defer mu.Unlock()
		if down {
			problem(w, http.StatusServiceUnavailable, "unavailable", "2")
			return true
		}
		return false
	}, client.RetryPolicy{BaseDelay: time.Second, MaxDelay: 8 * time.Second, MaxElapsed: 30 * time.Second})
	start := clk.Now()
	_, err := c.Submit(context.Background(), "permit_report", permit)
	require.ErrorIs(t, err, client.ErrNotConfirmed)
	require.ErrorIs(t, err, job.ErrUnavailable)
	require.Contains(t, err.Error(), "unavailable right now")
	require.LessOrEqual(t, clk.Now().Sub(start), 30*time.Second)
	require.Greater(t, len(cs.at), 3)
	for i := 1; i < len(cs.at); i++ {
		require.GreaterOrEqual(t, cs.at[i].Sub(cs.at[i-1]), 2*time.Second)
		require.Equal(t, cs.keys[0], cs.keys[i])
	}
	mu.Lock()
	down = false
	mu.Unlock()
	sub, err := c.Submit(context.Background(), "permit_report", map[string]any{"case_id": 47, "revision": 29, "pages": 63})
	require.NoError(t, err)
	require.True(t, sub.Reused)
	require.Equal(t, cs.keys[0], cs.keys[len(cs.keys)-1])
}

// Backoff is full jitter under an exponential, capped ceiling, floored by
// Retry-After.
func TestBackoffShape(t *testing.T) {
	t.Parallel()
	draw := 0.999
	p := client.RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second, Rand: func() float64 { return draw }}
	var prev time.Duration
	for n := range 8 {
		d := p.Backoff(n, 0)
		require.LessOrEqual(t, d, 2*time.Second)
		require.GreaterOrEqual(t, d, prev)
		prev = d
	}
	require.InDelta(t, float64(2*time.Second), float64(p.Backoff(50, 0)), float64(10*time.Millisecond))
	draw = 0
	require.Zero(t, p.Backoff(3, 0))
	require.Equal(t, 7*time.Second, p.Backoff(3, 7*time.Second), "Retry-After beyond the cap still counts")
}

// Cancelling the context stops the retries at once.
func TestRetryRespectsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cs, c, _ := fakeSetup(t, func(n int, w http.ResponseWriter) bool {
		if n == 2 {
			cancel()
		}
		problem(w, http.StatusBadGateway, "bad-gateway", "")
		return true
	}, client.RetryPolicy{})
	_, err := c.Submit(ctx, "permit_report", permit)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, client.ErrNotConfirmed)
	require.Len(t, cs.at, 2)
}

// An attempt that gets no answer in time is abandoned and retried with the
// same key and body.
func TestAttemptTimeoutRetriesWithSameKey(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	cs, c, _ := fakeSetup(t, func(n int, w http.ResponseWriter) bool {
		if n == 1 {
			<-release // a server that never answers this attempt
			return true
		}
		return false
	}, client.RetryPolicy{AttemptTimeout: 200 * time.Millisecond, Rand: func() float64 { return 0 }})
	t.Cleanup(func() { close(release) }) // before the server's Close, which waits for handlers
	sub, err := c.Submit(context.Background(), "permit_report", permit)
	require.NoError(t, err)
	require.Equal(t, 2, sub.Attempts)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	require.Equal(t, cs.keys[0], cs.keys[1])
	require.Equal(t, cs.bodies[0], cs.bodies[1])
}

// The time budget is used to its end: the last retry waits only what is
// left of it and starts at the deadline, instead of giving up as soon as a
// (jittered, growing) delay would overshoot it. A Retry-After beyond what is
// left ends the retrying at once: waiting less would ignore the server.
func TestRetryUsesTheWholeBudget(t *testing.T) {
	t.Parallel()
	for _, draw := range []float64{0.999, 0.5} {
		cs, c, clk := fakeSetup(t, func(n int, w http.ResponseWriter) bool {
			problem(w, http.StatusServiceUnavailable, "unavailable", "")
			return true
		}, client.RetryPolicy{BaseDelay: 250 * time.Millisecond, MaxDelay: 15 * time.Second, MaxElapsed: 2 * time.Second,
			Rand: func() float64 { return draw }})
		start := clk.Now()
		_, err := c.Submit(context.Background(), "permit_report", permit)
		require.ErrorIs(t, err, client.ErrNotConfirmed)
		require.Equal(t, 2*time.Second, cs.at[len(cs.at)-1].Sub(start), "draw %v: the last attempt starts at the end of the budget", draw)
		require.Equal(t, 2*time.Second, clk.Now().Sub(start), "draw %v: and nothing waits past it", draw)
	}
	cs, c, clk := fakeSetup(t, func(n int, w http.ResponseWriter) bool {
		problem(w, http.StatusServiceUnavailable, "unavailable", "5")
		return true
	}, client.RetryPolicy{MaxElapsed: 2 * time.Second})
	start := clk.Now()
	_, err := c.Submit(context.Background(), "permit_report", permit)
	require.ErrorIs(t, err, client.ErrNotConfirmed)
	require.Len(t, cs.at, 1)
	require.Zero(t, clk.Now().Sub(start))
}

package client_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/stretchr/testify/require"
)

// updates collects what Wait hands to onUpdate.
type updates struct {
	mu  sync.Mutex
	got []*job.Resource
	ch  chan *job.Resource
}

func newUpdates() *updates { return &updates{ch: make(chan *job.Resource, 64)} }

func (u *updates) on(r *job.Resource) {
	u.mu.Lock()
	u.got = append(u.got, r)
	u.mu.Unlock()
	u.ch <- r
}

// next waits for an update satisfying ok.
func (u *updates) next(t *testing.T, ok func(*job.Resource) bool) *job.Resource {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case r := <-u.ch:
			if ok(r) {
				return r
			}
		case <-deadline:
			t.Fatal("no matching update within 15s")
		}
	}
}

// driveJob moves a job through running with progress to succeeded, waiting
// for Wait to report each step before the next.
// waitResult is what a Wait run in another goroutine ended with.
type waitResult struct {
	res *job.Resource
	err error
}

// waitAsync runs c.Wait in its own goroutine; the result is checked on the
// test's goroutine (recvWait), never with require inside the goroutine.
func waitAsync(ctx context.Context, c *client.Client, id string, on func(*job.Resource)) <-chan waitResult {
	done := make(chan waitResult, 1)
	go func() {
		res, err := c.Wait(ctx, id, on)
		done <- waitResult{res, err}
	}()
	return done
}

func recvWait(t *testing.T, done <-chan waitResult) *job.Resource {
	t.Helper()
	select {
	case r := <-done:
		require.NoError(t, r.err)
		return r.res
	case <-time.After(60 * time.Second):
		t.Fatal("Wait did not return")
		return nil
	}
}

func driveJob(t *testing.T, b *testBundle, u *updates, id string, pdf []byte) {
	u.next(t, func(r *job.Resource) bool { return r.State == job.StateQueued })
	b.mutate(t, id, func(r *job.Record) error {
		r.Attempt = 1
		r.Progress = &job.Progress{Done: 0, Total: 3, Unit: "pages"}
		return r.Transition(job.StateRunning, time.Now())
	})
	for done := 0; done <= 3; done++ {
		if done > 0 {
			b.mutate(t, id, func(r *job.Record) error {
				r.Progress = &job.Progress{Done: done, Total: 3, Unit: "pages"}
				return r.Transition(job.StateRunning, time.Now())
			})
		}
		u.next(t, func(r *job.Resource) bool { return r.Progress != nil && r.Progress.Done == done })
	}
	b.succeed(t, id, pdf, "")
}

func TestWaitFollowsEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := newProxy(t, b.URL)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL, b.Token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := c.Submit(ctx, "permit_report", permit)
	require.NoError(t, err)

	u := newUpdates()
	done := waitAsync(ctx, c, sub.Job.ID, u.on)
	driveJob(t, b, u, sub.Job.ID, []byte("%PDF-1.7 three pages"))
	final := recvWait(t, done)
	require.Equal(t, job.StateSucceeded, final.State)
	require.NotNil(t, final.Result)
	last := u.got[len(u.got)-1]
	require.Equal(t, job.StateSucceeded, last.State)

	for _, r := range p.requests() {
		require.NotEqual(t, "GET /v1/jobs/"+sub.Job.ID, r, "events were offered: no polling")
	}
	require.Contains(t, p.requests(), "GET /v1/jobs/"+sub.Job.ID+"/events")
	pending, err := c.Pending(ctx)
	require.NoError(t, err)
	require.Empty(t, pending, "a job seen finished ends its journal entry")
}

// A gateway without the event stream (404 like an unknown route): Wait
// long-polls with the ETag instead and still sees every step.
func TestWaitFallsBackToPolling(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := newProxy(t, b.URL)
	p.setHook(func(w http.ResponseWriter, r *http.Request, _ func() *http.Response) bool {
		if strings.HasSuffix(r.URL.Path, "/events") {
			problem(w, http.StatusNotFound, "not-found", "")
			return true
		}
		return false
	})
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	clk := newFakeClock() // Retry-After pacing without real sleeps
	c := newClient(t, srv.URL, b.Token, client.WithClock(clk))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sub, err := c.Submit(ctx, "permit_report", permit)
	require.NoError(t, err)

	u := newUpdates()
	done := waitAsync(ctx, c, sub.Job.ID, u.on)
	driveJob(t, b, u, sub.Job.ID, []byte("%PDF-1.7 polled"))
	final := recvWait(t, done)
	require.Equal(t, job.StateSucceeded, final.State)
	polls := 0
	for _, r := range p.requests() {
		if r == "GET /v1/jobs/"+sub.Job.ID {
			polls++
		}
	}
	require.GreaterOrEqual(t, polls, 5)
	clk.mu.Lock()
	sleeps := append([]time.Duration(nil), clk.sleeps...)
	clk.mu.Unlock()
	for _, s := range sleeps {
		require.LessOrEqual(t, s, 30*time.Second)
	}
}

// Reads carry the stored version's ETag; an unchanged job answers 304.
func TestGetIfChanged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newClient(t, b.URL, b.Token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := c.Submit(ctx, "permit_report", permit)
	require.NoError(t, err)
	s, err := c.GetIfChanged(ctx, sub.Job.ID, "", 0)
	require.NoError(t, err)
	require.NotEmpty(t, s.ETag)
	require.Positive(t, s.RetryAfter)
	same, err := c.GetIfChanged(ctx, sub.Job.ID, s.ETag, 0)
	require.NoError(t, err)
	require.True(t, same.NotModified)
	require.Nil(t, same.Job)

	// A long-poll answers as soon as the job changes.
	type answer struct {
		s   *client.Snapshot
		err error
	}
	changed := make(chan answer, 1)
	go func() {
		s, err := c.GetIfChanged(ctx, sub.Job.ID, s.ETag, 20*time.Second)
		changed <- answer{s, err}
	}()
	b.mutate(t, sub.Job.ID, func(r *job.Record) error { return r.Transition(job.StateRunning, time.Now()) })
	select {
	case a := <-changed:
		require.NoError(t, a.err)
		got := a.s
		require.False(t, got.NotModified)
		require.Equal(t, job.StateRunning, got.Job.State)
	case <-time.After(25 * time.Second):
		t.Fatal("long-poll did not return")
	}
}

func TestWaitUnknownJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newClient(t, b.URL, b.Token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Wait(ctx, "job_aaaaaaaaaaaaaaaaaaaaaaaaaa", nil)
	require.ErrorIs(t, err, job.ErrNotFound)
}

func TestDownload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newClient(t, b.URL, b.Token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := c.Submit(ctx, "permit_report", permit)
	require.NoError(t, err)

	var buf bytes.Buffer
	_, err = c.Download(ctx, sub.Job.ID, &buf)
	require.ErrorIs(t, err, job.ErrResultNotReady)
	require.Zero(t, buf.Len())

	pdf := bytes.Repeat([]byte("%PDF-1.7 page\n"), 5000)
	b.succeed(t, sub.Job.ID, pdf, "")
	d, err := c.Download(ctx, sub.Job.ID, &buf)
	require.NoError(t, err)
	require.Equal(t, pdf, buf.Bytes())
	require.Equal(t, int64(len(pdf)), d.Size)
	require.Equal(t, "application/pdf", d.ContentType)

	// A result that does not match what the job announced is refused.
	other, err := c.Submit(ctx, "permit_report", map[string]any{"case_id": 1, "revision": 1})
	require.NoError(t, err)
	b.succeed(t, other.Job.ID, []byte("%PDF tampered"), strings.Repeat("0", 64))
	buf.Reset()
	_, err = c.Download(ctx, other.Job.ID, &buf)
	require.ErrorIs(t, err, client.ErrDigestMismatch)

	third, err := c.Submit(ctx, "permit_report", map[string]any{"case_id": 2, "revision": 1})
	require.NoError(t, err)
	_, err = c.Cancel(ctx, third.Job.ID)
	require.NoError(t, err)
	_, err = c.Download(ctx, third.Job.ID, &buf)
	require.ErrorIs(t, err, job.ErrJobCanceled)
	_, err = c.Cancel(ctx, third.Job.ID)
	require.ErrorIs(t, err, job.ErrTerminal)
}

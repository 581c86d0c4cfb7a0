package renderer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/failpoint"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

func TestSubmittedReportSucceedsWithAPDFOfItsPages(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	rec := b.admit(t, "r-63", 63)

	done := b.terminal(t, rec, 60*time.Second)
	require.Equal(t, job.StateSucceeded, done.State)
	require.Equal(t, 1, done.Attempt)
	require.NotNil(t, done.FinishedAt)
	require.NotNil(t, done.StartedAt)
	require.Nil(t, done.Error)
	require.Equal(t, &job.Progress{Done: 63, Total: 63, Unit: "pages"}, done.Progress)

	data := b.result(t, done)
	require.Equal(t, 63, pdfPages(t, data))
	sum := sha256.Sum256(data)
	require.Equal(t, &job.Output{Object: rec.ID + ".a1", ContentType: "application/pdf", Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}, done.Output)
	// The stored file is the deterministic rendering of the request.
	want := renderReport(t, ReportInput{Tenant: rec.Tenant, Requester: rec.Requester, CaseID: 47, Revision: 29, Pages: 63, CreatedAt: rec.CreatedAt})
	require.Equal(t, want, data)

	require.Equal(t, []int{1}, b.renders.of(rec.ID))
	// The renderer announces each change it writes once: the claim, the
	// checkpoints, the end (the queued event is the relay's).
	events := jobtest.Events(t, b.conn.Res, rec)
	jobtest.RequireOneIDPerRevision(t, rec, events)
	require.Equal(t, []job.State{job.StateRunning, job.StateSucceeded}, jobtest.States(events))
	last := events[len(events)-1].Resource
	require.Equal(t, &job.Progress{Done: 63, Total: 63, Unit: "pages"}, last.Progress, "the last event says how far the job got")
	// Checkpoints travel with the beats: a render that outlasts a few of
	// them shows its progress while running too (one faster than a beat,
	// without the race detector, may end before its first).
	if done.FinishedAt.Sub(*done.StartedAt) > 3*testConfig().HeartbeatInterval {
		progressed := 0
		for _, e := range events {
			if e.Resource.State == job.StateRunning && e.Resource.Progress != nil && e.Resource.Progress.Done > 0 {
				progressed++
			}
		}
		require.Positive(t, progressed, "a JetStream consumer of the events sees the progress checkpoints")
	}
	require.Eventually(t, func() bool { return jobtest.WorkMessages(t, b.conn.Res) == 0 }, 10*time.Second, 20*time.Millisecond)
}

// quickTakeover makes a vanished renderer's job come back within a second.
func quickTakeover(c *Config) {
	c.HeartbeatInterval = 100 * time.Millisecond
}

func TestRendererDyingMidRenderIsFinishedByAnother(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	b := &testBundle{env: env, conn: env.Connect(t, "test"), renders: &renderCount{byID: map[string][]int{}}}

	// Renderer A dies mid-render as `renderer.mid-render=exit`
	// would kill its process: its connection drops, its goroutine ends, and
	// nothing it would still have done happens.
	fp, err := failpoint.Parse("renderer.mid-render=exit")
	require.NoError(t, err)
	died := make(chan struct{})
	var connA *jobtest.Conn
	fp.Exit = func(int) {
		connA.NC.Close()
		close(died)
		runtime.Goexit()
	}
	_, connA = b.startOn(t, "renderer-a", quickTakeover, func(c *Config) { c.Failpoints = fp; c.Concurrency = 1 })
	rec := b.admit(t, "dies-mid-render", 40)
	select {
	case <-died:
	case <-time.After(30 * time.Second):
		t.Fatal("renderer A never reached its first checkpoint")
	}
	running, err := b.conn.Res.Jobs.Get(context.Background(), rec.Key())
	require.NoError(t, err)
	require.Equal(t, job.StateRunning, running.State)
	require.Equal(t, "renderer-a", running.Worker)

	b.start(t, "renderer-b", quickTakeover)
	done := b.terminal(t, rec, 60*time.Second)
	require.Equal(t, job.StateSucceeded, done.State)
	require.Equal(t, 2, done.Attempt)
	require.Equal(t, "renderer-b", done.Worker)
	require.Equal(t, []int{1, 2}, b.renders.of(rec.ID))
	require.Equal(t, []string{rec.ID + ".a2"}, jobtest.Objects(t, b.conn.Res), "exactly one result object")
	require.Equal(t, 40, pdfPages(t, b.result(t, done)))
	require.Eventually(t, func() bool { return jobtest.WorkMessages(t, b.conn.Res) == 0 }, 10*time.Second, 20*time.Millisecond)
}

func TestRenderTimeoutWithOneAttemptFails(t *testing.T) {
	t.Parallel()
	_, b := setup(t, slowStart, func(c *Config) { c.MaxAttempts = 1; c.RenderTimeout = time.Second })
	rec := b.admit(t, "too-slow", 20)

	done := b.terminal(t, rec, 30*time.Second)
	require.Equal(t, job.StateFailed, done.State)
	require.Equal(t, job.CategoryTimeout, done.Error.Category)
	require.Contains(t, done.Error.Message, "time budget")
	require.NotNil(t, done.FinishedAt)
	require.Nil(t, done.RetryAt)
	require.Equal(t, 1, done.Attempt)
	require.Empty(t, jobtest.Objects(t, b.conn.Res))
	require.Eventually(t, func() bool { return jobtest.WorkMessages(t, b.conn.Res) == 0 }, 10*time.Second, 20*time.Millisecond)
}

func TestTimeoutIsRetriedWithBackoffThenFailsWithItsCause(t *testing.T) {
	t.Parallel()
	_, b := setup(t, slowStart, func(c *Config) {
		c.MaxAttempts = 2
		c.RenderTimeout = time.Second
		c.HeartbeatInterval = 200 * time.Millisecond
	})
	rec := b.env.Commit(t, b.conn.Res, jobtest.Request{Key: "slow-twice", Pages: 20})
	history := jobtest.Watch(t, b.conn.Res, rec.Key())
	require.NoError(t, natsjs.PublishWork(context.Background(), b.conn.Res.JS, rec, 0))

	done := b.terminal(t, rec, 30*time.Second)
	require.Equal(t, job.StateFailed, done.State)
	require.Equal(t, 2, done.Attempt)
	require.Equal(t, job.CategoryTimeout, done.Error.Category)
	require.Equal(t, []int{1, 2}, b.renders.of(rec.ID))

	// Between the attempts the job stayed running, with no worker, the
	// first attempt's cause and the time the next attempt was due: a
	// pause drawn from [0, RetryBase) (full jitter; RetryBase is ten beats).
	between := history.Find(func(r *job.Record) bool {
		return r.State == job.StateRunning && r.Attempt == 1 && r.Worker == "" && r.RetryAt != nil
	})
	require.NotNil(t, between, "no version between the attempts among %d seen", len(history.All()))
	require.Equal(t, job.CategoryTimeout, between.Error.Category)
	require.False(t, between.RetryAt.Before(between.UpdatedAt), "retry_at %s is before the failure %s", between.RetryAt, between.UpdatedAt)
	require.Less(t, between.RetryAt.Sub(between.UpdatedAt), 2*time.Second, "the pause is at most the first step")
	second := history.Find(func(r *job.Record) bool { return r.Attempt == 2 })
	require.False(t, second.StartedAt.IsZero())
	require.False(t, second.HeartbeatAt.Before(*between.RetryAt), "the second attempt waited for its backoff")
}

func TestTwoRenderersRenderTwoHundredJobsOnceEach(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	b.start(t, "renderer-b")
	recs := make([]*job.Record, 200)
	for i := range recs {
		recs[i] = b.admit(t, jobtest.ID("bulk", i), 1+i%3)
	}
	workers := map[string]int{}
	for _, rec := range recs {
		done := b.terminal(t, rec, 120*time.Second)
		require.Equal(t, job.StateSucceeded, done.State, rec.ID)
		require.Equal(t, 1, done.Attempt, rec.ID)
		require.Equal(t, []int{1}, b.renders.of(rec.ID), "job %s rendered more than once", rec.ID)
		workers[done.Worker]++
	}
	require.Equal(t, 200, b.renders.total())
	require.Len(t, jobtest.Objects(t, b.conn.Res), 200)
	require.Len(t, workers, 2, "both renderers took work: %v", workers)
	require.Eventually(t, func() bool { return jobtest.WorkMessages(t, b.conn.Res) == 0 }, 10*time.Second, 20*time.Millisecond)
}

func TestARendererWhoseJobWasTakenOverStopsAndLeavesItAlone(t *testing.T) {
	t.Parallel()
	_, b := setup(t, quickTakeover)
	rec := b.admit(t, "taken-over", 150)
	jobtest.WaitFor(t, b.conn.Res, rec.Key(), 30*time.Second, func(r *job.Record) bool {
		return r.State == job.StateRunning && r.Progress != nil && r.Progress.Done > 0
	})
	// Another renderer claimed the job meanwhile (it judged this one gone)
	// and then vanished itself.
	now := time.Now().UTC()
	ghost, err := b.conn.Res.Jobs.Mutate(context.Background(), rec.Key(), func(r *job.Record) error {
		r.Attempt, r.Worker, r.HeartbeatAt = 2, "renderer-ghost", &now
		return nil
	})
	require.NoError(t, err)

	// The first renderer stops at its next checkpoint without writing the
	// job; the work message it left unacknowledged comes back and the
	// ghost's attempt is taken over in turn.
	done := b.terminal(t, rec, 60*time.Second)
	seen, _ := json.Marshal(done)
	require.Equal(t, job.StateSucceeded, done.State, "%s", seen)
	require.Equal(t, 3, done.Attempt)
	require.Equal(t, []int{1, 3}, b.renders.of(rec.ID))
	require.Equal(t, []string{rec.ID + ".a3"}, jobtest.Objects(t, b.conn.Res))
	require.Greater(t, done.Revision, ghost.Revision)
}

// The declaration other services' tests use (jobtest.PermitReport) is the
// one the renderer makes.
func TestRendererDeclaresPermitReportAsTheFixtureDoes(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := b.conn.Res.Types.Get(ctx, TypeName)
	require.NoError(t, err)
	want := jobtest.PermitReport()
	require.JSONEq(t, string(want.Schema), string(got.Schema))
	require.Equal(t, want.Description, got.Description)
	require.Equal(t, want.ContentType, got.ContentType)
	require.Equal(t, want.MaxResultBytes, got.MaxResultBytes)
	require.Equal(t, testConfig().MaxAttempts, got.Attempts)
	require.Equal(t, int(testConfig().RenderTimeout/time.Second), got.TimeoutSeconds)
}

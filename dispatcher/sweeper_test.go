package dispatcher

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

func TestSweeperRedispatchesAJobWhoseWorkerWentSilent(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	rec := b.put(t, "silent-worker", running(1, "renderer-gone", time.Now().Add(-time.Hour)))

	done := jobtest.WaitFor(t, b.conn.Res, rec.Key(), 10*time.Second, func(r *job.Record) bool { return r.Worker == "" })
	require.Equal(t, job.StateRunning, done.State, "between attempts a job stays running")
	require.Equal(t, 1, done.Attempt, "attempt counts attempts started")
	require.NotNil(t, done.RetryAt)
	require.Equal(t, job.CategoryWorkerLost, done.Error.Category, "the silent attempt's verdict")
	// A fresh work message, its generation the revision of the re-dispatch.
	require.Eventually(t, func() bool { return len(b.workIDs(t, rec)) == 1 }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, []string{fmt.Sprintf("%s.r%d", rec.ID, done.Revision)}, b.workIDs(t, rec))
}

func TestSweeperFailsAJobWhoseWorkerVanishedOnItsLastAttempt(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	rec := b.put(t, "last-attempt-lost", running(3, "renderer-gone", time.Now().Add(-time.Hour)))

	done := jobtest.Terminal(t, b.conn.Res, rec.Key(), 10*time.Second)
	require.Equal(t, job.StateFailed, done.State)
	require.Equal(t, job.CategoryWorkerLost, done.Error.Category)
	require.Equal(t, 3, done.Attempt)
	require.NotNil(t, done.FinishedAt)
	require.Empty(t, b.workIDs(t, rec), "no more work for a failed job")
	require.Eventually(t, func() bool {
		evs := jobtest.Events(t, b.conn.Res, rec)
		return len(evs) == 1 && evs[0].Resource.State == job.StateFailed && evs[0].MsgID == fmt.Sprintf("%s.%d", rec.ID, done.Revision)
	}, 10*time.Second, 20*time.Millisecond)
}

func TestSweeperFailsWithTheLastAttemptsCauseWhenItsRetryNeverCame(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.MaxAttempts = 2 })
	old := time.Now().Add(-time.Hour).UTC()
	rec := b.put(t, "retry-lost", func(r *job.Record) {
		running(2, "", old)(r)
		r.RetryAt = &old
		r.Error = &job.Failure{Category: job.CategoryTimeout, Message: "rendering did not finish within its time budget", Retryable: true}
	})
	done := jobtest.Terminal(t, b.conn.Res, rec.Key(), 10*time.Second)
	require.Equal(t, job.StateFailed, done.State)
	require.Equal(t, job.CategoryTimeout, done.Error.Category, "the last attempt's cause, not exhausted")
	require.Contains(t, done.Error.Message, "attempt 2 of 2")
}

func TestSweeperLeavesJobsWithALiveWorkerAlone(t *testing.T) {
	t.Parallel()
	d, b := setup(t, func(c *Config) { c.RenderTimeout = time.Hour; c.SweepInterval = time.Hour })
	rec := b.put(t, "alive", running(1, "renderer-x", time.Now()))
	require.Eventually(t, func() bool { return d.running.len() == 1 }, 10*time.Second, 10*time.Millisecond)

	d.sweep(context.Background())
	after, err := b.conn.Res.Jobs.Get(context.Background(), rec.Key())
	require.NoError(t, err)
	require.Equal(t, rec.Revision, after.Revision)
	require.Equal(t, "renderer-x", after.Worker)
}

func TestSweeperTracksOnlyOpenJobsFromTheWatch(t *testing.T) {
	t.Parallel()
	d, b := setup(t, func(c *Config) { c.SweepInterval = time.Hour })
	rec := b.put(t, "tracked", running(1, "renderer-x", time.Now()))
	b.env.Commit(t, b.conn.Res, jobtest.Request{Key: "queued"})
	require.Eventually(t, func() bool { return d.running.len() == 2 }, 10*time.Second, 10*time.Millisecond)
	b.mutate(t, rec, func(r *job.Record) { require.NoError(t, r.Transition(job.StateSucceeded, time.Now())) })
	require.Eventually(t, func() bool { return d.running.len() == 1 }, 10*time.Second, 10*time.Millisecond)

	// A dispatcher started later learns the open jobs from the watch's
	// initial values.
	late := b.start(t, "dispatcher-late", func(c *Config) { c.SweepInterval = time.Hour })
	require.Equal(t, 1, late.running.len())
}

func TestSweeperLeavesASilentJobWhoseWorkWaitsInTheQueue(t *testing.T) {
	t.Parallel()
	d, b := setup(t, func(c *Config) { c.SweepInterval = time.Hour })
	old := time.Now().Add(-time.Hour).UTC()
	rec := b.put(t, "backlogged-retry", func(r *job.Record) {
		running(1, "", old)(r)
		r.RetryAt = &old
	})
	// Its retry is in the queue behind a backlog: no renderer took it yet.
	require.NoError(t, natsjs.PublishWork(context.Background(), b.conn.Res.JS, rec, 0))
	require.Eventually(t, func() bool { return d.running.len() == 1 }, 10*time.Second, 10*time.Millisecond)

	d.sweep(context.Background())
	after, err := b.conn.Res.Jobs.Get(context.Background(), rec.Key())
	require.NoError(t, err)
	require.Equal(t, rec.Revision, after.Revision)
	require.Equal(t, []string{rec.ID}, b.workIDs(t, rec), "no duplicate work")
}

func TestSweeperFailsARunningJobNearTheEndOfItsRetention(t *testing.T) {
	t.Parallel()
	d, b := setup(t, func(c *Config) { c.RenderTimeout = time.Hour })
	ttl, margin := d.retention()
	require.Equal(t, 720*time.Hour, ttl, "the store's")
	require.Equal(t, time.Hour, margin, "the default margin at the default 720h retention")
	old := time.Now().Add(-719*time.Hour - 30*time.Minute).UTC()
	young := time.Now().Add(-718 * time.Hour).UTC()
	rec := b.put(t, "running-for-a-month", func(r *job.Record) {
		r.CreatedAt = old
		running(1, "renderer-x", time.Now())(r) // alive: only its age ends it
	})
	left := b.put(t, "younger", func(r *job.Record) { r.CreatedAt = young })

	done := jobtest.Terminal(t, b.conn.Res, rec.Key(), 10*time.Second)
	require.Equal(t, job.StateFailed, done.State)
	require.Equal(t, job.CategoryExpired, done.Error.Category)
	require.Contains(t, done.Error.Message, "running")
	require.Eventually(t, func() bool {
		evs := jobtest.Events(t, b.conn.Res, rec)
		return len(evs) == 1 && evs[0].Resource.Error.Category == job.CategoryExpired
	}, 10*time.Second, 20*time.Millisecond)

	require.Eventually(t, func() bool { return d.running.len() == 1 }, 10*time.Second, 10*time.Millisecond)
	d.sweep(context.Background())
	after, err := b.conn.Res.Jobs.Get(context.Background(), left.Key())
	require.NoError(t, err)
	require.Equal(t, job.StateQueued, after.State, "a job an hour and more from the end of its retention is left")
}

package renderer

import (
	"context"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

func TestPageBudgetFailsAtOnceWithoutRetry(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.MaxPages = 50 })
	rec := b.admit(t, "too-many-pages", 63)

	done := b.terminal(t, rec, 30*time.Second)
	require.Equal(t, job.StateFailed, done.State)
	require.Equal(t, job.CategoryBudgetExceeded, done.Error.Category)
	require.Contains(t, done.Error.Message, "page budget of 50")
	require.False(t, done.Error.Retryable)
	require.Equal(t, 1, done.Attempt, "a permanent failure is not retried")
	// The renderer announces its own two changes, once each, under the
	// revision they were stored with (the queued event is the relay's).
	events := jobtest.Events(t, b.conn.Res, rec)
	require.Len(t, events, 2)
	require.Equal(t, job.StateRunning, events[0].Resource.State)
	require.Equal(t, job.StateFailed, events[1].Resource.State)
	require.Regexp(t, `^`+rec.ID+`\.[0-9]+$`, events[0].MsgID)
	require.Regexp(t, `^`+rec.ID+`\.[0-9]+$`, events[1].MsgID)
	require.NotEqual(t, events[0].MsgID, events[1].MsgID)
	require.Eventually(t, func() bool { return jobtest.WorkMessages(t, b.conn.Res) == 0 }, 10*time.Second, 20*time.Millisecond)
}

func TestOutputBudgetFailsBudgetExceeded(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.MaxOutputBytes = 20 << 10 })
	rec := b.admit(t, "too-big", 63)

	done := b.terminal(t, rec, 30*time.Second)
	require.Equal(t, job.StateFailed, done.State)
	require.Equal(t, job.CategoryBudgetExceeded, done.Error.Category)
	require.Contains(t, done.Error.Message, "larger than the limit of 20480 bytes")
	require.Equal(t, 1, done.Attempt)
	require.Empty(t, jobtest.Objects(t, b.conn.Res))
}

// put writes a record in a given state, as another component would have
// left it, and publishes work for it.
func (b *testBundle) put(t *testing.T, key string, generation int, edit func(r *job.Record)) *job.Record {
	t.Helper()
	rec := b.env.Commit(t, b.conn.Res, jobtest.Request{Key: key, Pages: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, err := b.conn.Res.Jobs.Mutate(ctx, rec.Key(), func(r *job.Record) error { edit(r); return nil })
	require.NoError(t, err)
	require.NoError(t, natsjs.PublishWork(ctx, b.conn.Res.JS, rec, generation))
	return rec
}

// A delivery of a job another worker runs changes nothing while that
// worker's heartbeat is fresh; the message is kept, not acknowledged, so
// when the other worker turns out to be gone (its claim goes stale) this
// one takes the job over at once instead of leaving it to the dispatcher.
func TestJobRunningElsewhereIsLeftAloneUntilItsClaimIsStale(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	rec := b.put(t, "held-elsewhere", 0, func(r *job.Record) {
		now := time.Now().UTC()
		require.NoError(t, r.Transition(job.StateRunning, now))
		r.Attempt, r.Worker, r.HeartbeatAt = 1, "renderer-x", &now
	})
	stale := rec.HeartbeatAt.Add(brokerFor(testConfig()).StaleAfter)
	require.Never(t, func() bool {
		after, err := b.conn.Res.Jobs.Get(context.Background(), rec.Key())
		return err != nil || after.Revision != rec.Revision || len(b.renders.of(rec.ID)) > 0
	}, time.Until(stale)-500*time.Millisecond, 50*time.Millisecond, "the duplicate delivery changed nothing while renderer-x looked alive")
	done := b.terminal(t, rec, 20*time.Second)
	require.Equal(t, job.StateSucceeded, done.State)
	require.Equal(t, 2, done.Attempt)
	require.Equal(t, []int{2}, b.renders.of(rec.ID), "taken over once renderer-x's claim went stale")
}

func TestLastAttemptsVanishedWorkerFailsTheJobWorkerLost(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	rec := b.put(t, "ghost-last-attempt", 9, func(r *job.Record) {
		old := time.Now().UTC().Add(-time.Hour)
		require.NoError(t, r.Transition(job.StateRunning, old))
		r.Attempt, r.Worker, r.HeartbeatAt = 3, "renderer-gone", &old
	})
	done := b.terminal(t, rec, 20*time.Second)
	require.Equal(t, job.StateFailed, done.State)
	require.Equal(t, job.CategoryWorkerLost, done.Error.Category)
	require.Equal(t, 3, done.Attempt)
	require.NotNil(t, done.FinishedAt)
	require.Empty(t, b.renders.of(rec.ID))
}

func TestVanishedWorkersJobIsTakenOverWhileAttemptsRemain(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	rec := b.put(t, "ghost-first-attempt", 1, func(r *job.Record) {
		old := time.Now().UTC().Add(-time.Hour)
		require.NoError(t, r.Transition(job.StateRunning, old))
		r.Attempt, r.Worker, r.HeartbeatAt = 1, "renderer-gone", &old
	})
	done := b.terminal(t, rec, 20*time.Second)
	require.Equal(t, job.StateSucceeded, done.State)
	require.Equal(t, 2, done.Attempt)
	require.Equal(t, []int{2}, b.renders.of(rec.ID))
}

package job

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var allStates = []State{StateQueued, StateRunning, StateSucceeded, StateFailed, StateCanceled}

// TestTransitionTable checks every one of the 25 from/to pairs against the
// contract's state rules: queued → running → succeeded | failed, canceled
// from queued or running, never backwards, nothing out of a terminal state.
func TestTransitionTable(t *testing.T) {
	t.Parallel()
	legal := map[[2]State]bool{
		{StateQueued, StateRunning}:    true,
		{StateQueued, StateCanceled}:   true,
		{StateQueued, StateFailed}:     true, // the sweeper fails a job that can never run
		{StateRunning, StateRunning}:   true, // a new attempt, a checkpoint
		{StateRunning, StateSucceeded}: true,
		{StateRunning, StateFailed}:    true,
		{StateRunning, StateCanceled}:  true,
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, from := range allStates {
		for _, to := range allStates {
			want := legal[[2]State{from, to}]
			require.Equal(t, want, from.CanTransition(to), "%s → %s", from, to)
			r := &Record{State: from}
			err := r.Transition(to, now)
			if want {
				require.NoError(t, err, "%s → %s", from, to)
				require.Equal(t, to, r.State)
				require.Equal(t, now, r.UpdatedAt)
				require.Equal(t, to.Terminal(), r.FinishedAt != nil, "%s → %s finished_at", from, to)
				continue
			}
			require.ErrorIs(t, err, ErrInvalidState, "%s → %s", from, to)
			require.Equal(t, from, r.State, "a refused move leaves the record as it was")
			require.Nil(t, r.FinishedAt)
		}
	}
}

func TestClaim(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t.Run("queued", func(t *testing.T) {
		r := &Record{ID: "job_a", State: StateQueued}
		require.NoError(t, r.Claim("w1", now))
		require.Equal(t, StateRunning, r.State)
		require.Equal(t, 1, r.Attempt)
		require.Equal(t, "w1", r.Worker)
		require.Equal(t, now, *r.StartedAt)
		require.Nil(t, r.Error)
	})
	t.Run("between attempts keeps the previous cause", func(t *testing.T) {
		retry := now.Add(-time.Second)
		prev := &Failure{Category: CategoryTimeout, Message: "slow", Retryable: true}
		r := &Record{State: StateRunning, Attempt: 1, RetryAt: &retry, Error: prev, Progress: &Progress{Done: 3, Total: 9}}
		require.NoError(t, r.Claim("w2", now))
		require.Equal(t, 2, r.Attempt)
		require.Nil(t, r.RetryAt)
		require.Nil(t, r.Progress)
		require.Equal(t, prev, r.Error)
	})
	t.Run("taken over from a vanished worker", func(t *testing.T) {
		r := &Record{State: StateRunning, Attempt: 1, Worker: "gone"}
		require.NoError(t, r.Claim("w2", now))
		require.Equal(t, CategoryWorkerLost, r.Error.Category)
		require.Equal(t, "w2", r.Worker)
	})
	for _, s := range []State{StateSucceeded, StateFailed, StateCanceled} {
		r := &Record{State: s, Attempt: 1}
		require.ErrorIs(t, r.Claim("w", now), ErrInvalidState, "claim of a %s job", s)
		require.Equal(t, 1, r.Attempt)
	}
	require.ErrorIs(t, (&Record{State: StateQueued}).Claim("", now), ErrInvalidState)
}

func TestReleaseRetryFailSucceedCancel(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	running := func() *Record {
		r := &Record{State: StateQueued}
		require.NoError(t, r.Claim("w", now))
		return r
	}

	r := running()
	require.NoError(t, r.Release(now))
	require.Equal(t, StateRunning, r.State)
	require.Empty(t, r.Worker)
	require.Equal(t, now, *r.RetryAt)
	require.Error(t, (&Record{State: StateQueued}).Release(now))
	require.Equal(t, 1, r.AttemptsUsed(), "a release by the dispatcher (worker lost) counts")

	r = running()
	require.NoError(t, r.GiveBack(now))
	require.Empty(t, r.Worker)
	require.Equal(t, 1, r.Attempt)
	require.Equal(t, 0, r.AttemptsUsed(), "an attempt its worker gave back uses up none")
	require.NoError(t, r.Claim("w2", now))
	require.Equal(t, 2, r.Attempt, "attempt numbers only grow")
	require.Equal(t, 1, r.AttemptsUsed())

	r = running()
	at := now.Add(time.Minute)
	f := &Failure{Category: CategoryRenderError, Message: "x", Retryable: true}
	require.NoError(t, r.ScheduleRetry(f, at, now))
	require.Equal(t, at, *r.RetryAt)
	require.Equal(t, f, r.Error)
	require.Empty(t, r.Worker)
	require.Error(t, (&Record{State: StateSucceeded}).ScheduleRetry(f, at, now))

	r = running()
	require.NoError(t, r.Fail(f, now))
	require.Equal(t, StateFailed, r.State)
	require.Equal(t, f, r.Error)
	require.ErrorIs(t, r.Fail(f, now), ErrInvalidState, "a failed job cannot fail again")

	r = running()
	r.SetProgress(Progress{Done: 4, Total: 10, Unit: "rows"}, now)
	out := &Output{Object: "job_a", Size: 3}
	require.NoError(t, r.Succeed(out, now))
	require.Equal(t, StateSucceeded, r.State)
	require.Equal(t, 10, r.Progress.Done)
	require.Equal(t, out, r.Output)
	require.ErrorIs(t, r.Cancel(now), ErrTerminal, "a succeeded job cannot be canceled")
	require.ErrorIs(t, r.Fail(f, now), ErrInvalidState, "a succeeded job cannot become failed")
	require.Equal(t, StateSucceeded, r.State)

	r = &Record{State: StateQueued}
	require.NoError(t, r.Cancel(now))
	require.Equal(t, StateCanceled, r.State)
	require.True(t, errors.Is(r.Claim("w", now), ErrInvalidState))
}

func TestLimitsFallBackToDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, 3, (&Record{}).AttemptsOr(3))
	require.Equal(t, 5, (&Record{MaxAttempts: 5}).AttemptsOr(3))
	require.Equal(t, time.Minute, (&Record{}).TimeoutOr(time.Minute))
	require.Equal(t, 7*time.Second, (&Record{TimeoutSeconds: 7}).TimeoutOr(time.Minute))
}

// While a job waits for its next attempt, its resource says why the last
// one failed and when the next is due.
func TestAResourceWaitingForARetryShowsTheLastError(t *testing.T) {
	now := time.Now().UTC()
	r := &Record{ID: "job_x", State: StateQueued, CreatedAt: now, UpdatedAt: now}
	require.NoError(t, r.Claim("w", now))
	require.Nil(t, r.Resource("", time.Time{}).Error, "running: no error")
	f := &Failure{Category: CategoryTimeout, Message: "the attempt did not finish", Retryable: true}
	require.NoError(t, r.ScheduleRetry(f, now.Add(time.Minute), now))
	res := r.Resource("", time.Time{})
	require.NotNil(t, res.RetryAt)
	require.Equal(t, f, res.Error)
}

func TestExpireFailsOnlyOpenJobs(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, from := range allStates {
		r := &Record{State: from, Attempt: 1, Worker: "w"}
		err := r.Expire(720*time.Hour, now)
		if from.Terminal() {
			require.ErrorIs(t, err, ErrInvalidState, "%s", from)
			require.Equal(t, from, r.State)
			continue
		}
		require.NoError(t, err, "%s", from)
		require.Equal(t, StateFailed, r.State)
		require.Equal(t, CategoryExpired, r.Error.Category)
		require.False(t, r.Error.Retryable)
		require.Contains(t, r.Error.Message, string(from))
		require.Equal(t, now, *r.FinishedAt)
		require.Equal(t, now, r.UpdatedAt)
	}
}

// A scheduled job becomes queued (Due) or is canceled; it never starts an
// attempt straight from scheduled, and one whose start_by passed before any
// attempt is canceled deadline_exceeded, which its resource shows.
func TestScheduledLifecycle(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	runAt, startBy := now.Add(time.Hour), now.Add(2*time.Hour)
	r := &Record{ID: "job_s", State: StateScheduled, CreatedAt: now, UpdatedAt: now, RunAt: &runAt, StartBy: &startBy}
	require.ErrorIs(t, r.Clone().Claim("w1", now), ErrInvalidState, "no attempt starts from scheduled")
	require.Equal(t, runAt, r.RetentionStart(), "its retention counts from its run_at")

	q := r.Clone()
	require.NoError(t, q.Due(runAt))
	require.Equal(t, StateQueued, q.State)
	require.ErrorIs(t, q.Due(runAt), ErrInvalidState, "only a scheduled job becomes due")
	require.NoError(t, q.Claim("w1", runAt))

	require.False(t, r.MissedStart(startBy))
	require.ErrorIs(t, r.Clone().CancelDeadline(startBy), ErrInvalidState)
	late := startBy.Add(time.Second)
	c := r.Clone()
	require.NoError(t, c.CancelDeadline(late))
	require.Equal(t, StateCanceled, c.State)
	require.Equal(t, CategoryDeadline, c.Resource("", late).Error.Category)

	c = r.Clone()
	require.NoError(t, c.Cancel(now))
	require.Nil(t, c.Resource("", now).Error, "a requester's cancel shows no error")
}

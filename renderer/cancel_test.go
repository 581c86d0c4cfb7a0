package renderer

import (
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

func TestCanceledQueuedJobIsNeverRendered(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	b := &testBundle{env: env, conn: env.Connect(t, "test"), renders: &renderCount{byID: map[string][]int{}}}
	rec := b.admit(t, "cancel-queued", 10)
	canceled := b.cancel(t, rec)
	require.Equal(t, job.StateCanceled, canceled.State)

	b.start(t, "renderer-a")
	// The work message is taken and dropped without a render.
	require.Eventually(t, func() bool { return jobtest.WorkMessages(t, b.conn.Res) == 0 }, 20*time.Second, 20*time.Millisecond)
	after := b.terminal(t, rec, time.Second)
	require.Equal(t, job.StateCanceled, after.State)
	require.Equal(t, 0, after.Attempt)
	require.Empty(t, b.renders.of(rec.ID))
	require.Empty(t, jobtest.Objects(t, b.conn.Res))
}

func TestCanceledRunningJobStopsAtItsNextCheckpoint(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	rec := b.admit(t, "cancel-running", 2000)
	jobtest.WaitFor(t, b.conn.Res, rec.Key(), 30*time.Second, func(r *job.Record) bool {
		return r.State == job.StateRunning && r.Progress != nil && r.Progress.Done > 0
	})
	canceled := b.cancel(t, rec)
	require.Equal(t, job.StateCanceled, canceled.State)

	// The renderer notices at its next checkpoint, stops and acknowledges
	// the work; the job stays canceled and no result is stored.
	require.Eventually(t, func() bool { return jobtest.WorkMessages(t, b.conn.Res) == 0 }, 20*time.Second, 20*time.Millisecond)
	after := b.terminal(t, rec, time.Second)
	require.Equal(t, job.StateCanceled, after.State)
	require.Equal(t, canceled.Revision, after.Revision, "nothing wrote the job after its cancel")
	require.Less(t, after.Progress.Done, 2000)
	require.Empty(t, jobtest.Objects(t, b.conn.Res))
	require.Equal(t, []int{1}, b.renders.of(rec.ID))
}

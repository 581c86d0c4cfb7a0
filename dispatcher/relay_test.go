package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/jobtest"
	"github.com/jobgate/jobgate/pkg/job"
	"github.com/stretchr/testify/require"
)

func TestRelayPublishesWorkOfAJobCommittedButNeverPublished(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	b := &testBundle{env: env, conn: env.Connect(t, "test")}
	// A gateway committed this job and died before publishing its work.
	rec := env.Commit(t, b.conn.Res, jobtest.Request{Key: "crashed-after-commit", Pages: 63})
	require.Zero(t, jobtest.WorkMessages(t, b.conn.Res))

	b.start(t, "dispatcher-a")
	require.Eventually(t, func() bool { return len(b.workIDs(t, rec)) == 1 }, 10*time.Second, 20*time.Millisecond)
	// The very message the gateway would have published (same Nats-Msg-Id),
	// so a gateway that did publish makes the relay's copy a duplicate.
	require.Equal(t, []string{rec.ID}, b.workIDs(t, rec))
	require.Eventually(t, func() bool { return len(jobtest.Events(t, b.conn.Res, rec)) == 1 }, 10*time.Second, 20*time.Millisecond)
	ev := jobtest.Events(t, b.conn.Res, rec)[0]
	require.Equal(t, rec.ID+".queued.0", ev.MsgID)
	require.Equal(t, job.StateQueued, ev.Resource.State)
	require.Nil(t, ev.Resource.Result)
}

func TestRelayPublishesAnEventPerStateChange(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	rec := b.env.Admit(t, b.conn.Res, jobtest.Request{Key: "events", Pages: 5})
	waitEvents := func(ids ...string) []jobtest.Event {
		t.Helper()
		var evs []jobtest.Event
		require.Eventually(t, func() bool {
			evs = jobtest.Events(t, b.conn.Res, rec)
			return len(evs) == len(ids)
		}, 10*time.Second, 20*time.Millisecond)
		require.Equal(t, ids, jobtest.EventIDs(evs))
		return evs
	}
	waitEvents(rec.ID + ".queued.0")

	now := time.Now()
	rec = b.mutate(t, rec, running(1, "renderer-x", now))
	waitEvents(rec.ID+".queued.0", rec.ID+".running.1")

	// A checkpoint of the same attempt is a change of the record, yet the
	// same state: its event is the running.1 one, de-duplicated.
	rec = b.mutate(t, rec, func(r *job.Record) { r.Progress = &job.Progress{Done: 2, Total: 5, Unit: "pages"} })
	rec = b.mutate(t, rec, func(r *job.Record) { require.NoError(t, r.Transition(job.StateFailed, time.Now())) })
	evs := waitEvents(rec.ID+".failed.1", rec.ID+".queued.0", rec.ID+".running.1")
	require.Equal(t, job.StateFailed, evs[len(evs)-1].Resource.State)
	require.Equal(t, []string{rec.ID}, b.workIDs(t, rec), "only the queued version asks for work")

	// Deleting a record announces nothing.
	require.NoError(t, b.conn.Res.Jobs.KV().Delete(context.Background(), rec.Key()))
	other := b.env.Admit(t, b.conn.Res, jobtest.Request{Key: "after-delete"})
	require.Eventually(t, func() bool { return len(jobtest.Events(t, b.conn.Res, other)) == 1 }, 10*time.Second, 20*time.Millisecond)
	require.Len(t, jobtest.Events(t, b.conn.Res, rec), 3)
}

func TestSeveralDispatchersRelayEachJobOnce(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	b.start(t, "dispatcher-b")
	recs := make([]*job.Record, 30)
	for i := range recs {
		recs[i] = b.env.Commit(t, b.conn.Res, jobtest.Request{Key: jobtest.ID("many", i)})
	}
	require.Eventually(t, func() bool { return jobtest.WorkMessages(t, b.conn.Res) == 30 }, 20*time.Second, 20*time.Millisecond)
	for _, rec := range recs {
		require.Equal(t, []string{rec.ID}, b.workIDs(t, rec))
		require.Eventually(t, func() bool { return len(jobtest.Events(t, b.conn.Res, rec)) == 1 }, 10*time.Second, 20*time.Millisecond)
	}
}

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
	require.Equal(t, fmt.Sprintf("%s.%d", rec.ID, rec.Revision), ev.MsgID)
	require.Equal(t, job.StateQueued, ev.Resource.State)
	require.Nil(t, ev.Resource.Result)

	// The work names the admission's event: its claim announces itself
	// after it without a lookup.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events, err := b.conn.Res.JS.Stream(ctx, natsjs.StreamEvents)
	require.NoError(t, err)
	last, err := events.GetLastMsgForSubject(ctx, natsjs.EventSubject(rec.Tenant, rec.Requester, rec.ID))
	require.NoError(t, err)
	work, err := b.conn.Res.Work.Lanes(rec.Type).Oldest(ctx, rec.Tenant, rec.Requester, 0)
	require.NoError(t, err)
	require.NotNil(t, work)
	require.Equal(t, last.Sequence, work.Event)
}

func TestRelayAnnouncesAdmissionsAndTerminalChangesTheirWriterLeftOut(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	rec := b.env.Admit(t, b.conn.Res, jobtest.Request{Key: "events", Pages: 5})
	waitEvents := func(n int) []jobtest.Event {
		t.Helper()
		var evs []jobtest.Event
		require.Eventually(t, func() bool {
			evs = jobtest.Events(t, b.conn.Res, rec)
			return len(evs) == n
		}, 10*time.Second, 20*time.Millisecond)
		jobtest.RequireOneIDPerRevision(t, rec, evs)
		return evs
	}
	// The gateway leaves the admission's event to the relay.
	evs := waitEvents(1)
	require.Equal(t, job.StateQueued, evs[0].Resource.State)

	// A worker's own changes are its to announce: a running version and a
	// checkpoint that no one announced stay unannounced by the relay ...
	now := time.Now()
	rec = b.mutate(t, rec, running(1, "renderer-x", now))
	rec = b.mutate(t, rec, func(r *job.Record) { r.Progress = &job.Progress{Done: 2, Total: 5, Unit: "pages"} })
	// ... but a terminal change whose writer died before announcing it is
	// announced by the relay after its grace period, under its revision.
	rec = b.mutate(t, rec, func(r *job.Record) { require.NoError(t, r.Transition(job.StateFailed, time.Now())) })
	evs = waitEvents(2)
	require.Equal(t, job.StateFailed, evs[1].Resource.State)
	require.Equal(t, fmt.Sprintf("%s.%d", rec.ID, rec.Revision), evs[1].MsgID)
	require.Equal(t, []string{rec.ID}, b.workIDs(t, rec), "only the queued version asks for work")

	// A terminal change its writer did announce is not announced twice.
	other := b.env.Admit(t, b.conn.Res, jobtest.Request{Key: "announced", Pages: 5})
	require.Eventually(t, func() bool { return len(jobtest.Events(t, b.conn.Res, other)) == 1 }, 10*time.Second, 20*time.Millisecond)
	other = b.mutate(t, other, func(r *job.Record) { require.NoError(t, r.Cancel(time.Now())) })
	require.NoError(t, natsjs.PublishEvent(context.Background(), b.conn.Res.JS, other))
	// Polled here, not by require.Never: its last look may still run in a
	// goroutine of its own when it returns, and fail on the closed
	// connection once the test has ended.
	for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		require.LessOrEqual(t, len(jobtest.Events(t, b.conn.Res, other)), 2, "announced twice")
	}
	evs = jobtest.Events(t, b.conn.Res, other)
	jobtest.RequireOneIDPerRevision(t, other, evs)
	require.Equal(t, []job.State{job.StateQueued, job.StateCanceled}, jobtest.States(evs))
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

// The relay stores the admission's event as the job's first event in one
// step; a job admitted again under the id of an earlier job whose events
// are still on the stream (its record expired, the events live longer)
// still gets its admission announced.
func TestRelayAnnouncesAJobAdmittedAgainUnderAnEarlierJobsID(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Record revisions grow with the bucket: the earlier job's last one
	// is below any the new admission gets (another job is admitted first).
	then := time.Now().Add(-time.Hour).UTC()
	earlier := &job.Record{ID: job.DeriveID(b.env.Secret, "4", "reviewer-47", "again"), Tenant: "4", Requester: "reviewer-47",
		Type: "permit_report", State: job.StateCanceled, CreatedAt: then, UpdatedAt: then, FinishedAt: &then, Revision: 1}
	require.NoError(t, natsjs.PublishEvent(ctx, b.conn.Res.JS, earlier))
	b.env.Admit(t, b.conn.Res, jobtest.Request{Key: "in-between", Pages: 5})

	rec := b.env.Admit(t, b.conn.Res, jobtest.Request{Key: "again", Pages: 5})
	require.Equal(t, earlier.ID, rec.ID, "one key, one id")
	require.Greater(t, rec.Revision, earlier.Revision)
	require.Eventually(t, func() bool { return len(jobtest.Events(t, b.conn.Res, rec)) == 2 }, 10*time.Second, 20*time.Millisecond)
	evs := jobtest.Events(t, b.conn.Res, rec)
	require.Equal(t, []job.State{job.StateCanceled, job.StateQueued}, jobtest.States(evs))
	require.Equal(t, fmt.Sprintf("%s.%d", rec.ID, rec.Revision), evs[1].MsgID)
}

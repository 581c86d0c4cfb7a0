package natsjs_test

import (
	"testing"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// eventRevisions lists the record revisions of the job's stored events, in
// the order a subscriber of its subject receives them.
func eventRevisions(t *testing.T, js jetstream.JetStream, r *job.Record) []uint64 {
	t.Helper()
	ctx := storeCtx(t)
	s, err := js.Stream(ctx, natsjs.StreamEvents)
	require.NoError(t, err)
	var revs []uint64
	var seq uint64 = 1
	for {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(natsjs.EventSubject(r.Tenant, r.Requester, r.ID)))
		if err != nil {
			require.ErrorIs(t, err, jetstream.ErrMsgNotFound)
			return revs
		}
		rev, ok := natsjs.EventRevision(m.Header.Get(jetstream.MsgIDHeader))
		require.True(t, ok)
		revs = append(revs, rev)
		seq = m.Sequence + 1
	}
}

func atRevision(r *job.Record, rev uint64, state job.State) *job.Record {
	c := r.Clone()
	c.Revision, c.State = rev, state
	return c
}

// A writer that froze between its record write and that change's event
// (SIGSTOP past the stale limit, while another worker took the job over and
// finished it) publishes late: its event must not land after the newer
// ones, whether it publishes after its own previous event or not knowing
// any (chaos seed 20261203: a running event stored after succeeded).
func TestALateEventIsNotStoredAfterANewerOne(t *testing.T) {
	t.Parallel()
	js := setupProvision(t)
	res, err := provision(js, natsjs.DefaultLayout())
	require.NoError(t, err)
	ctx := storeCtx(t)
	r := newRecord("4", "reviewer-47", "job_late")

	firstSeq, first, err := res.Events.PublishFirst(ctx, atRevision(r, 10, job.StateQueued))
	require.NoError(t, err)
	require.True(t, first)
	require.NotZero(t, firstSeq, "the stored event's sequence")
	// The frozen worker's claim: the newest event it knows is the queued one.
	queuedSeq, stored, err := res.Events.PublishAfter(ctx, atRevision(r, 11, job.StateRunning), 0)
	require.NoError(t, err)
	require.True(t, stored)
	// Its progress write (rev 12) is where it froze; meanwhile the worker
	// that took over announces its claim and its success.
	_, err = res.Events.Publish(ctx, atRevision(r, 20, job.StateRunning))
	require.NoError(t, err)
	stored, err = res.Events.Publish(ctx, atRevision(r, 21, job.StateSucceeded))
	require.NoError(t, err)
	require.True(t, stored)

	// Awake again, after its own last event...
	_, stored, err = res.Events.PublishAfter(ctx, atRevision(r, 12, job.StateRunning), queuedSeq)
	require.NoError(t, err)
	require.False(t, stored, "a late event after its writer's previous one")
	// ...or not knowing any.
	stored, err = res.Events.Publish(ctx, atRevision(r, 12, job.StateRunning))
	require.NoError(t, err)
	require.False(t, stored, "a late event")
	require.Equal(t, []uint64{10, 11, 20, 21}, eventRevisions(t, js, r))

	// The same change published twice is stored once.
	stored, err = res.Events.Publish(ctx, atRevision(r, 21, job.StateSucceeded))
	require.NoError(t, err)
	require.False(t, stored)
	require.Equal(t, []uint64{10, 11, 20, 21}, eventRevisions(t, js, r))
}

// Events published in the order of their changes are all stored, chained
// on the sequence the previous one got, and a chain another writer's event
// broke (a cancel between a worker's progress and its next event) goes on
// after that event.
func TestEventsInOrderAreAllStored(t *testing.T) {
	t.Parallel()
	js := setupProvision(t)
	res, err := provision(js, natsjs.DefaultLayout())
	require.NoError(t, err)
	ctx := storeCtx(t)
	r := newRecord("4", "reviewer-47", "job_chain")

	seq, stored, err := res.Events.PublishAfter(ctx, atRevision(r, 3, job.StateQueued), 0)
	require.NoError(t, err)
	require.True(t, stored, "the first event of a job")
	seq, stored, err = res.Events.PublishAfter(ctx, atRevision(r, 4, job.StateRunning), seq)
	require.NoError(t, err)
	require.True(t, stored)
	_, err = res.Events.Publish(ctx, atRevision(r, 6, job.StateRunning)) // another writer's
	require.NoError(t, err)
	_, stored, err = res.Events.PublishAfter(ctx, atRevision(r, 7, job.StateSucceeded), seq)
	require.NoError(t, err)
	require.True(t, stored, "a newer change after another writer's event")
	require.Equal(t, []uint64{3, 4, 6, 7}, eventRevisions(t, js, r))
}

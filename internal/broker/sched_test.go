package broker

import (
	"context"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"

	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// A finished job's work message is removed with the verdict of the broker
// that claimed it: the stream holds the work of jobs not yet ended, and no
// ended job's message comes up again to be read, checked and removed.
func TestTheWorkOfAnEndedJobIsRemoved(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "tidy", "text/plain").Error)
	tb.admit(t, "tidy", "t-1")
	a := tb.next(t, credA, "tidy", "worker-a")
	require.EqualValues(t, 1, jobtest.WorkMessages(t, tb.conn.Res))
	require.Nil(t, tb.ask(t, credA, "tidy", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: a.Key, Token: a.Token}}).Error)
	require.EqualValues(t, 0, jobtest.WorkMessages(t, tb.conn.Res))
}

// A verdict is checked against the record the claim wrote, but written only
// over the record as it is: a job canceled meanwhile (by the gateway, which
// this broker does not hear of) stays canceled, and the worker is told.
func TestAVerdictOnAJobChangedElsewhereIsRefused(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "moved", "text/plain").Error)
	tb.admit(t, "moved", "m-1")
	a := tb.next(t, credA, "moved", "worker-a")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := tb.conn.Res.Jobs.Mutate(ctx, a.Key, func(r *job.Record) error { return r.Cancel(time.Now().UTC()) })
	require.NoError(t, err)
	before := tb.record(t, a.Key)

	r := tb.ask(t, credA, "moved", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: a.Key, Token: a.Token}})
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodeLost, r.Error.Code)
	require.True(t, r.Canceled, "the worker learns the job was canceled")
	after := tb.record(t, a.Key)
	require.Equal(t, job.StateCanceled, after.State)
	require.Equal(t, before.Revision, after.Revision, "no write")
}

// A notice of new work is a plain delivery of the published message and
// can come seconds before the stream has stored it (a loaded disk): the
// lane it names is read again, less and less often, for seconds after its
// read found nothing, so the job is taken when it is stored, not at the
// next listing of the stream, 30 s later.
func TestWorkStoredSecondsAfterItsNoticeIsTakenBeforeTheNextListing(t *testing.T) {
	t.Parallel()
	b, tb, offset := setupClocked(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.Nil(t, tb.declare(t, credA, "late_store", "text/plain").Error)
	s, err := b.sched(ctx, "late_store")
	require.NoError(t, err)
	s.stop() // from here on, the test delivers the notices

	// The notice comes; the stream has not stored the message yet, for
	// two seconds and more.
	var pending *job.Record
	rec := tb.admitWith(t, "late_store", "ls-1", func(rec *job.Record) {
		pending = rec
		s.notice(rec.Tenant, rec.Requester, job.DefaultPriority)
	})
	for range 3 {
		r := tb.ask(t, credA, "late_store", wire.OpNext, wire.NextRequest{Worker: "worker-a"})
		require.Nil(t, r.Error)
		require.Nil(t, r.Job, "nothing stored yet")
		offset.Add(int64(time.Second))
	}
	require.NoError(t, tb.conn.Res.Work.Publish(ctx, pending, 0)) // stored now; its notice was the one above
	a := tb.next(t, credA, "late_store", "worker-a")
	require.Equal(t, rec.Key(), a.Key)
}

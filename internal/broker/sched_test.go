package broker

import (
	"context"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"testing"

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

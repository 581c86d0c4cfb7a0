package broker

import (
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/jobtest"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/stretchr/testify/require"
)

// A finished job's work message is removed once its broker looks at it
// again: the stream holds the work of jobs not yet ended, nothing more.
func TestTheWorkOfAnEndedJobIsRemoved(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "tidy", "text/plain").Error)
	tb.admit(t, "tidy", "t-1")
	a := tb.next(t, credA, "tidy", "worker-a")
	require.Nil(t, tb.ask(t, credA, "tidy", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: a.Key, Token: a.Token}}).Error)
	require.EqualValues(t, 1, jobtest.WorkMessages(t, tb.conn.Res))
	deadline := time.Now().Add(10 * time.Second)
	for jobtest.WorkMessages(t, tb.conn.Res) != 0 {
		require.True(t, time.Now().Before(deadline), "the work message stayed")
		r := tb.ask(t, credA, "tidy", wire.OpNext, wire.NextRequest{Worker: "worker-a", WaitMS: 1500})
		require.Nil(t, r.Error)
		require.Nil(t, r.Job)
	}
}

package jobtest

import (
	"sync/atomic"
	"testing"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// CountEventReads counts, from now on, the reads of JOBGATE_EVENTS' messages
// (direct gets and message gets) any connection of e makes.
func (e *Env) CountEventReads(t testing.TB) *atomic.Int64 {
	t.Helper()
	return e.CountReads(t, natsjs.StreamEvents)
}

// CountReads counts, from now on, the reads of a stream's messages (direct
// gets, a batch one counting once, and message gets) any connection of e
// makes: a plain subscription to the JetStream API subjects sees each
// request.
func (e *Env) CountReads(t testing.TB, stream string) *atomic.Int64 {
	t.Helper()
	var reads atomic.Int64
	watch := e.Connect(t, "reads-"+stream)
	for _, subj := range []string{"$JS.API.DIRECT.GET." + stream + ".>", "$JS.API.DIRECT.GET." + stream,
		"$JS.API.STREAM.MSG.GET." + stream} {
		sub, err := watch.NC.Subscribe(subj, func(*nats.Msg) { reads.Add(1) })
		require.NoError(t, err)
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	require.NoError(t, watch.NC.Flush())
	return &reads
}

package broker

import (
	"strconv"
	"testing"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

// A busy lane is read ahead: one requester's backlog of 32 jobs is handed
// out, each once and in order, for a couple of batch reads of the work
// stream instead of one round trip a job (during which every other
// request on the lane would wait its turn).
func TestABusyLaneIsReadAhead(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "ahead", "text/plain").Error)
	var keys []string
	for i := range 32 {
		keys = append(keys, tb.admit(t, "ahead", "ahead-"+strconv.Itoa(i)).Key())
	}
	reads := tb.env.CountReads(t, natsjs.StreamWork)
	var got []string
	for range keys {
		got = append(got, tb.next(t, credA, "ahead", "worker-a").Key)
	}
	require.Equal(t, keys, got, "every job once, oldest first")
	require.LessOrEqual(t, reads.Load(), int64(4), "reads of the work stream for 32 jobs")
}

package broker

import (
	"strconv"
	"testing"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/stretchr/testify/require"
)

// Ranking a tenant's requesters by priority costs no read of its own: 8
// requesters with 20 jobs each, over the five priorities, taken one at a
// time, read the work stream a few times a requester and priority (a
// batch, and one read that finds its end), not once a job or a pick.
func TestPriorityRanksRequestersWithoutReads(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	tb.declareFlow(t, "report", api.Flow{})
	const requesters, each = 8, 20
	for i := range each {
		for r := range requesters {
			tb.admitJobAs(t, "report", "4", "r"+strconv.Itoa(r), "j-"+strconv.Itoa(r)+"-"+strconv.Itoa(i), 1+(i+r)%5)
		}
	}
	reads := tb.env.CountReads(t, natsjs.StreamWork)
	takeAll(t, tb, "report", requesters*each)
	n := reads.Load()
	t.Logf("%d reads of the work stream for %d jobs of %d requesters over 5 priorities", n, requesters*each, requesters)
	require.LessOrEqual(t, n, int64(2*requesters*5), "reads of the work stream: two a requester and priority at most")
}

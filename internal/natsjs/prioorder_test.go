package natsjs_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

// A lane's messages of one priority are read oldest first, whatever the
// order of their jobs' ids, from any point of the lane, with other
// priorities and lanes between them and messages removed before them.
func TestAPriorityIsReadOldestFirst(t *testing.T) {
	t.Parallel()
	res, err := provision(setupProvision(t), natsjs.DefaultLayout())
	require.NoError(t, err)
	ctx := storeCtx(t)
	rng := rand.New(rand.NewPCG(1, 2))
	type pub struct {
		id   string
		prio int
		req  string
	}
	var pubs []pub
	lanes := res.Work.Lanes("permit_report")
	for i := range 60 {
		p := pub{id: fmt.Sprintf("job_%08x", rng.Uint32()), prio: []int{5, 5, 1, 3}[i%4], req: []string{"ann", "vip"}[rng.IntN(2)]}
		r := newRecord("4", p.req, p.id)
		r.Revision, r.Priority = 1, p.prio
		require.NoError(t, res.Work.Publish(ctx, r, 0))
		pubs = append(pubs, p)
	}
	all, err := lanes.OldestBatch(ctx, "4", "ann", 0, 100, 1<<20)
	require.NoError(t, err)
	seqOf := map[string]uint64{}
	for _, m := range all {
		seqOf[m.Rec.ID] = m.Seq
	}
	// Remove a few, as claims do.
	for i, p := range pubs {
		if p.req == "ann" && i%7 == 0 {
			require.NoError(t, lanes.Remove(ctx, seqOf[p.id]))
			delete(seqOf, p.id)
		}
	}
	for _, prio := range []int{5, 1, 3} {
		for _, from := range []uint64{0, 5, 17, 33} {
			var want []string
			for _, p := range pubs {
				if s, ok := seqOf[p.id]; ok && p.prio == prio && s >= from {
					want = append(want, p.id)
				}
			}
			var got []string
			for at := from; ; {
				msgs, err := lanes.OldestBatchAt(ctx, "4", "ann", prio, at, 3, 1<<20)
				require.NoError(t, err)
				if len(msgs) == 0 {
					break
				}
				for _, m := range msgs {
					got = append(got, m.Rec.ID)
					at = m.Seq + 1
				}
			}
			require.Equal(t, want, got, "priority %d from %d", prio, from)
		}
	}
}

package natsjs_test

import (
	"strconv"
	"testing"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

// A batch read of a lane returns its messages oldest first, only its own
// (not another requester's), no more than asked, and none from past its
// last; a byte budget stops it after the first message that reaches it.
// A batch's message says whether it was the last of its filter then, and
// each its priority.
func TestALaneIsReadInBatches(t *testing.T) {
	t.Parallel()
	res, err := provision(setupProvision(t), natsjs.DefaultLayout())
	require.NoError(t, err)
	ctx := storeCtx(t)
	var ids []string
	for i := range 5 {
		r := newRecord("4", "alice", "job_alice"+strconv.Itoa(i))
		r.Revision = 1
		require.NoError(t, res.Work.Publish(ctx, r, 0))
		ids = append(ids, r.ID)
		other := newRecord("4", "bob", "job_bob"+strconv.Itoa(i))
		other.Revision = 1
		require.NoError(t, res.Work.Publish(ctx, other, 0))
	}
	lanes := res.Work.Lanes("permit_report")
	idsOf := func(msgs []*natsjs.LaneMsg) []string {
		var out []string
		for _, m := range msgs {
			require.NotNil(t, m.Rec, "the message holds its record")
			require.Equal(t, "alice", m.Requester)
			require.Positive(t, m.Size)
			out = append(out, m.Rec.ID)
		}
		return out
	}

	first, err := lanes.OldestBatch(ctx, "4", "alice", 0, 3, 1<<20)
	require.NoError(t, err)
	require.Equal(t, ids[:3], idsOf(first))
	rest, err := lanes.OldestBatch(ctx, "4", "alice", first[2].Seq+1, 16, 1<<20)
	require.NoError(t, err)
	require.Equal(t, ids[3:], idsOf(rest), "up to the lane's last, and no other lane's")
	require.False(t, first[2].Last, "two more after the first batch")
	require.Equal(t, []bool{false, true}, []bool{rest[0].Last, rest[1].Last}, "the lane's last message")
	none, err := lanes.OldestBatch(ctx, "4", "alice", rest[1].Seq+1, 16, 1<<20)
	require.NoError(t, err)
	require.Empty(t, none)
	one, err := lanes.OldestBatch(ctx, "4", "alice", 0, 16, 1)
	require.NoError(t, err)
	require.Equal(t, ids[:1], idsOf(one), "the byte budget ends the batch after its first message")
	require.False(t, one[0].Last, "cut short by the byte budget, not the lane's last")
	single, err := lanes.OldestBatch(ctx, "4", "alice", 0, 1, 0)
	require.NoError(t, err)
	require.Equal(t, ids[:1], idsOf(single))
	require.False(t, single[0].Last, "a single get cannot tell")
	urgent := newRecord("4", "alice", "job_alice_urgent")
	urgent.Revision, urgent.Priority = 1, 1
	require.NoError(t, res.Work.Publish(ctx, urgent, 0))
	prio, err := lanes.OldestBatchAt(ctx, "4", "alice", 1, 0, 16, 1<<20)
	require.NoError(t, err)
	require.Len(t, prio, 1)
	require.Equal(t, []any{urgent.ID, 1, true}, []any{prio[0].Rec.ID, prio[0].Priority, prio[0].Last})
	require.Equal(t, 3, first[0].Priority, "no priority named: the default")
	empty, err := lanes.OldestBatch(ctx, "4", "carol", 0, 16, 1<<20)
	require.NoError(t, err)
	require.Empty(t, empty)

	// A stream read from its leader only (a cluster's) answers no batch
	// direct get: the lane is read a message at a time.
	s, err := res.JS.Stream(ctx, natsjs.StreamWork)
	require.NoError(t, err)
	cfg := s.CachedInfo().Config
	cfg.AllowDirect = false
	_, err = res.JS.UpdateStream(ctx, cfg)
	require.NoError(t, err)
	res, err = natsjs.Rebind(ctx, res.JS, res)
	require.NoError(t, err)
	leader, err := res.Work.Lanes("permit_report").OldestBatch(ctx, "4", "alice", 0, 16, 1<<20)
	require.NoError(t, err)
	require.Equal(t, ids[:1], idsOf(leader))
}

// A removed work message is gone from its lane; removing it again is no
// error; a stream that is not there is one.
func TestAWorkMessageIsRemovedOnce(t *testing.T) {
	t.Parallel()
	res, err := provision(setupProvision(t), natsjs.DefaultLayout())
	require.NoError(t, err)
	ctx := storeCtx(t)
	var seqs []uint64
	for i := range 2 {
		r := newRecord("4", "alice", "job_alice"+strconv.Itoa(i))
		r.Revision = 1
		require.NoError(t, res.Work.Publish(ctx, r, 0))
	}
	lanes := res.Work.Lanes("permit_report")
	msgs, err := lanes.OldestBatch(ctx, "4", "alice", 0, 16, 1<<20)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	for _, m := range msgs {
		seqs = append(seqs, m.Seq)
	}

	require.NoError(t, lanes.Remove(ctx, seqs[0]))
	left, err := lanes.OldestBatch(ctx, "4", "alice", 0, 16, 1<<20)
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, seqs[1], left[0].Seq, "only the removed message is gone")
	require.NoError(t, lanes.Remove(ctx, seqs[0]), "a message already gone")

	s, err := res.JS.Stream(ctx, natsjs.StreamWork)
	require.NoError(t, err)
	require.NoError(t, s.Purge(ctx))
	require.NoError(t, res.JS.DeleteStream(ctx, natsjs.StreamWork))
	err = lanes.Remove(ctx, seqs[1])
	require.Error(t, err)
	require.Contains(t, err.Error(), "stream not found")
}

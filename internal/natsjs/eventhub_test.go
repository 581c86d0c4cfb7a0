package natsjs_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

// publishEvent stores one event of requester's job id at revision rev and
// returns its stream sequence.
func publishEvent(t *testing.T, res *natsjs.Resources, tenant, requester, id string, rev uint64) uint64 {
	t.Helper()
	seq, stored, err := res.Events.PublishAfter(storeCtx(t), atRevision(newRecord(tenant, requester, id), rev, job.StateRunning), 0)
	require.NoError(t, err)
	require.True(t, stored)
	return seq
}

// next reads the feed's next event within 10s.
func nextEvent(t *testing.T, f *natsjs.RequesterFeed) natsjs.RequesterEvent {
	t.Helper()
	select {
	case e, ok := <-f.Events():
		require.True(t, ok, "the feed ended")
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
		return natsjs.RequesterEvent{}
	}
}

func requireQuiet(t *testing.T, f *natsjs.RequesterFeed) {
	t.Helper()
	select {
	case e, ok := <-f.Events():
		t.Fatalf("unexpected event %+v (open %v)", e, ok)
	case <-time.After(200 * time.Millisecond):
	}
}

// Any number of feeds share one consumer of the event stream; each gets
// the events of its own scope, in order, and a wildcard feed every tenant's.
func TestFeedsShareOneConsumerAndKeepToTheirScope(t *testing.T) {
	t.Parallel()
	js := setupProvision(t)
	res, err := provision(js, natsjs.DefaultLayout())
	require.NoError(t, err)
	ctx := storeCtx(t)
	a, err := res.Events.FollowRequester(ctx, "4", "alice", 0)
	require.NoError(t, err)
	defer a.Stop()
	b, err := res.Events.FollowRequester(ctx, "4", "bob", 0)
	require.NoError(t, err)
	defer b.Stop()
	all, err := res.Events.FollowRequester(ctx, "*", "*", 0)
	require.NoError(t, err)
	defer all.Stop()
	tenant4, err := res.Events.FollowRequester(ctx, "4", "*", 0)
	require.NoError(t, err)
	defer tenant4.Stop()

	s, err := js.Stream(ctx, natsjs.StreamEvents)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, info.State.Consumers, "four feeds, one consumer")

	a1 := publishEvent(t, res, "4", "alice", "job_a1", 10)
	b1 := publishEvent(t, res, "4", "bob", "job_b1", 11)
	c1 := publishEvent(t, res, "5", "carol", "job_c1", 12)
	a2 := publishEvent(t, res, "4", "alice", "job_a2", 13)
	require.Equal(t, a1, nextEvent(t, a).Seq)
	require.Equal(t, a2, nextEvent(t, a).Seq)
	require.Equal(t, b1, nextEvent(t, b).Seq)
	for _, want := range []uint64{a1, b1, c1, a2} {
		require.Equal(t, want, nextEvent(t, all).Seq)
	}
	for _, want := range []uint64{a1, b1, a2} {
		require.Equal(t, want, nextEvent(t, tenant4).Seq)
	}
	requireQuiet(t, a)
	requireQuiet(t, b)
}

// A feed that resumes after an event gets what was stored since, then the
// new events, each once, in order.
func TestAResumedFeedGetsWhatItMissedThenWhatComes(t *testing.T) {
	t.Parallel()
	js := setupProvision(t)
	res, err := provision(js, natsjs.DefaultLayout())
	require.NoError(t, err)
	ctx := storeCtx(t)
	live, err := res.Events.FollowRequester(ctx, "4", "alice", 0) // the hub runs already
	require.NoError(t, err)
	defer live.Stop()
	var seqs []uint64
	for i := range 5 {
		seqs = append(seqs, publishEvent(t, res, "4", "alice", fmt.Sprintf("job_r%d", i), uint64(10+i)))
	}
	publishEvent(t, res, "4", "bob", "job_other", 20)
	f, err := res.Events.FollowRequester(ctx, "4", "alice", seqs[1])
	require.NoError(t, err)
	defer f.Stop()
	more := publishEvent(t, res, "4", "alice", "job_more", 21)
	for _, want := range append(seqs[2:], more) {
		require.Equal(t, want, nextEvent(t, f).Seq)
	}
	requireQuiet(t, f)
}

// A feed whose reader stops reading is ended once its events pile up,
// and the other feeds go on getting theirs.
func TestASlowFeedIsEndedAndTheOthersGoOn(t *testing.T) {
	t.Parallel()
	js := setupProvision(t)
	res, err := provision(js, natsjs.DefaultLayout())
	require.NoError(t, err)
	ctx := storeCtx(t)
	slow, err := res.Events.FollowRequester(ctx, "4", "alice", 0)
	require.NoError(t, err)
	defer slow.Stop()
	fast, err := res.Events.FollowRequester(ctx, "4", "alice", 0)
	require.NoError(t, err)
	defer fast.Stop()
	const n = 400 // past the hub's buffer and the feed's own
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			publishEvent(t, res, "4", "alice", fmt.Sprintf("job_s%d", i), uint64(10+i))
		}
	}()
	for range n {
		nextEvent(t, fast)
	}
	<-done
	got := 0
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-slow.Events():
			if !ok {
				require.Less(t, got, n, "the slow feed ended before it got every event")
				return
			}
			got++
		case <-deadline:
			t.Fatal("the slow feed was not ended")
		}
	}
}

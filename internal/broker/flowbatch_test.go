package broker

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/stretchr/testify/require"
)

// runAll has workers take and finish jobs of typ until n are done, and
// returns the keys of the jobs started.
func runAll(t *testing.T, tb *testBundle, typ string, workers, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var done atomic.Int64
	var mu sync.Mutex
	var keys []string
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && done.Load() < int64(n) {
				r := tb.ask(t, credA, typ, wire.OpNext, wire.NextRequest{Worker: fmt.Sprintf("w%d", w), WaitMS: 300})
				if r.Error != nil || r.Job == nil {
					continue
				}
				d := tb.ask(t, credA, typ, wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: r.Job.Key, Token: r.Job.Token}})
				require.Nil(t, d.Error)
				mu.Lock()
				keys = append(keys, r.Job.Key)
				mu.Unlock()
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	require.Len(t, keys, n, "every job ran")
	return keys
}

// A type's limits cost few writes to JOBGATE_SLOTS: the starts of jobs
// under a concurrency key and a rate limit, and their verdicts, were three
// compare-and-sets a job (a place taken, a token, the place given back);
// a broker gives a place back in the next write on its key, groups the
// writes asked at the same time on one key, and takes tokens a batch at a
// time, so that N jobs cost fewer than N writes. The limits still hold:
// no more than the key's limit ran at once.
func TestLimitedStartsCostFewerWritesThanJobs(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	tb.declareFlow(t, "export", api.Flow{
		Concurrency: []api.ConcurrencyKey{{Key: "tenant", Limit: 1000}},
		RateLimit:   &api.RateLimit{PerSecond: 10000},
	})
	const jobs = 300
	for i := range jobs {
		tb.admitJob(t, "export", "4", fmt.Sprintf("e-%d", i), `{}`, 0)
	}
	writes := tb.env.CountWrites(t, natsjs.BucketSlots)
	runAll(t, tb, "export", 16, jobs)
	k := job.ConcurrencyKeyOf("export", api.ConcurrencyKey{Key: "tenant", Limit: 1000}, &job.Record{Tenant: "4"})
	requirePlacesGivenBack(t, tb, k.Key, "tenant 4")
	t.Logf("%d writes to %s for %d jobs", writes(), natsjs.BucketSlots, jobs)
	// 101 on a quiet machine, 162 under the CI suite (spares lapse after releaseDelay); 204-227 before the hand-on.
	require.Less(t, writes(), int64(jobs*3/5), "fewer writes than 3/5 of the jobs (three a job, one by one; a place handed on costs none)")
}

// Jobs that come one at a time, a little apart (longer than releaseDelay),
// under a key far from its limit, run on one place with no write after
// the first: the spare waits spareHold for the next start, since holding a
// place of a roomy key a little longer refuses no one. Before, each job
// cost a write to give its place back and another to take one.
func TestJobsALittleApartUnderARoomyKeyRunOnOnePlace(t *testing.T) {
	t.Parallel()
	b, tb := setup(t)
	tb.declareFlow(t, "export", api.Flow{Concurrency: []api.ConcurrencyKey{{Key: "requester", Limit: 10}}})
	first := tb.admitJob(t, "export", "4", "r-0", `{}`, 0)
	a := tb.next(t, credA, "export", "w")
	require.Equal(t, first.Key(), a.Key)
	require.Nil(t, tb.ask(t, credA, "export", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: a.Key, Token: a.Token}}).Error)

	writes := tb.env.CountWrites(t, natsjs.BucketSlots)
	const jobs = 5
	for i := 1; i <= jobs; i++ {
		time.Sleep(3 * releaseDelay) // the next job arrives a little later
		j := tb.admitJob(t, "export", "4", fmt.Sprintf("r-%d", i), `{}`, 0)
		a := tb.next(t, credA, "export", "w")
		require.Equal(t, j.Key(), a.Key)
		require.Nil(t, tb.ask(t, credA, "export", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: a.Key, Token: a.Token}}).Error)
	}
	require.Zero(t, writes(), "%d jobs ran on the first one's place", jobs)
	require.Equal(t, 1, b.places.waitingGives(), "the last one's place waits as a spare")
	k := job.ConcurrencyKeyOf("export", api.ConcurrencyKey{Key: "requester", Limit: 10}, tb.record(t, first.Key()))
	requirePlacesGivenBack(t, tb, k.Key, "the last job")
}

// A place given back at its attempt's verdict waits, in its broker, as a
// spare: the next job of the key takes it over with no write at all (its
// record names the place, the key's one place), and nobody who later
// meets the first job, ended, gives it back. At its broker's Stop, a
// place given back that waits is written.
func TestAPlaceGivenBackIsHandedOnToTheNextStartOnItsKeyOrWrittenAtStop(t *testing.T) {
	t.Parallel()
	b, tb := setup(t)
	b.places.delay = time.Hour // only the next write, or Stop, writes it
	tb.declareFlow(t, "export", api.Flow{Concurrency: []api.ConcurrencyKey{{Key: "tenant", Limit: 1}}})
	k := job.ConcurrencyKeyOf("export", api.ConcurrencyKey{Key: "tenant", Limit: 1}, &job.Record{Tenant: "4"})
	leased := func() int {
		n, err := tb.conn.Res.Slots.Leased(context.Background(), k.Key, time.Now())
		require.NoError(t, err)
		return n
	}
	first := tb.admitJob(t, "export", "4", "g-1", `{}`, 0)
	a := tb.next(t, credA, "export", "w")
	require.Equal(t, first.Key(), a.Key)
	require.Nil(t, tb.ask(t, credA, "export", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: a.Key, Token: a.Token}}).Error)
	require.Equal(t, 1, leased(), "the place is held a little longer")
	require.Equal(t, 1, b.places.waitingGives())

	second := tb.admitJob(t, "export", "4", "g-2", `{}`, 0)
	writes := tb.env.CountWrites(t, natsjs.BucketSlots)
	a2 := tb.next(t, credA, "export", "w")
	require.Equal(t, second.Key(), a2.Key, "the place given back is the next job's")
	require.Zero(t, writes(), "no write: the place is handed on")
	require.Zero(t, b.places.waitingGives())
	require.Equal(t, 1, leased())
	firstRec, secondRec := tb.record(t, first.Key()), tb.record(t, second.Key())
	require.Empty(t, firstRec.PlaceHolder(), "the first job's verdict ended its claim")
	require.NotEmpty(t, secondRec.Place, "the second's record names the place it was handed")
	require.NotEqual(t, secondRec.ClaimID, secondRec.Place)
	require.Greater(t, a2.LeaseMS, int64(0))

	// A broker that meets the first job, ended, gives back nothing: the
	// place is the second's, whose beat renews it.
	d, bad := b.decl(context.Background(), credA, "export")
	require.Nil(t, bad)
	b.release(context.Background(), d, firstRec)
	b.places.flush(k.Key) // whatever waits is written now
	require.Equal(t, 1, leased(), "the second job's place is held")
	beat := tb.ask(t, credA, "export", wire.OpBeat, wire.BeatRequest{Held: wire.Held{Key: a2.Key, Token: a2.Token}})
	require.Nil(t, beat.Error, "the second job's beat is answered ok")

	require.Nil(t, tb.ask(t, credA, "export", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: a2.Key, Token: a2.Token}}).Error)
	require.Equal(t, 1, b.places.waitingGives())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, b.Stop(ctx))
	require.Zero(t, leased(), "written at Stop")
}

// A place given back with no other write on its key is written within
// releaseDelay (here judged with a margin for a loaded machine).
func TestAPlaceGivenBackIsWrittenWithinItsBound(t *testing.T) {
	t.Parallel()
	b, tb := setup(t)
	tb.declareFlow(t, "export", api.Flow{Concurrency: []api.ConcurrencyKey{{Key: "tenant", Limit: 1}}})
	k := job.ConcurrencyKeyOf("export", api.ConcurrencyKey{Key: "tenant", Limit: 1}, &job.Record{Tenant: "4"})
	tb.admitJob(t, "export", "4", "d-1", `{}`, 0)
	a := tb.next(t, credA, "export", "w")
	require.Nil(t, tb.ask(t, credA, "export", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: a.Key, Token: a.Token}}).Error)
	answered := time.Now()
	requirePlacesGivenBack(t, tb, k.Key, "the finished job")
	took := time.Since(answered)
	t.Logf("given back %s after the done was answered", took)
	require.Less(t, took, releaseDelay+500*time.Millisecond)
	require.Zero(t, b.places.waitingGives())
}

// A place given back that waits does not touch another holder's: a beat
// of another attempt of the key renews its own place, answered ok, and
// its write carries the place given back.
func TestAPlaceGivenBackDoesNotFailAnotherAttemptsBeat(t *testing.T) {
	t.Parallel()
	b, tb := setup(t)
	b.places.delay = time.Hour
	tb.declareFlow(t, "export", api.Flow{Concurrency: []api.ConcurrencyKey{{Key: "tenant", Limit: 2}}})
	k := job.ConcurrencyKeyOf("export", api.ConcurrencyKey{Key: "tenant", Limit: 2}, &job.Record{Tenant: "4"})
	tb.admitJob(t, "export", "4", "h-1", `{}`, 0)
	tb.admitJob(t, "export", "4", "h-2", `{}`, 0)
	a := tb.next(t, credA, "export", "w1")
	c := tb.next(t, credA, "export", "w2")
	require.Nil(t, tb.ask(t, credA, "export", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: a.Key, Token: a.Token}}).Error)
	require.Equal(t, 1, b.places.waitingGives())
	time.Sleep(300 * time.Millisecond) // past beatLimit: the beat writes
	b.renewals.forget(tb.record(t, c.Key).ClaimID)
	r := tb.ask(t, credA, "export", wire.OpBeat, wire.BeatRequest{Held: wire.Held{Key: c.Key, Token: c.Token}})
	require.Nil(t, r.Error, "the other attempt's beat is answered ok")
	require.Zero(t, b.places.waitingGives(), "the beat's write carried the place given back")
	n, err := tb.conn.Res.Slots.Leased(context.Background(), k.Key, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, n, "the running attempt's place only")
}

// A rate limit taken in batches of tokens still holds across two brokers:
// with workers asking for more than the rate, the attempts started in any
// window of a second or more are at most the burst and the rate over the
// window and a batch's horizon (tokenHorizon). An attempt's start is its
// claim's time, taken before the claim waits for its token (the lock of
// its rate bucket in its broker, the store's answer): on a loaded machine
// that wait is tens of milliseconds, as it was with tokens taken one at a
// time; the windows allow a tenth of a second of it. (On a loaded machine
// the starts also stall now and then, batches or not: the rate asked of
// the run is a quarter of it.)
func TestBatchedRateTokensHoldTheRateAcrossTwoBrokers(t *testing.T) {
	_, tb := setup(t)
	tb.broker(t, true)
	const perSecond, burst = 40, 4
	tb.declareFlow(t, "partner_call", api.Flow{RateLimit: &api.RateLimit{PerSecond: perSecond, Burst: burst}})
	for i := range 400 {
		tb.admitJob(t, "partner_call", fmt.Sprint(i%4), fmt.Sprintf("q-%d", i), `{}`, 0)
	}
	const measure = 4 * time.Second
	starts := startsUnder(t, tb, "partner_call", 12, 200, measure)
	for _, window := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
		// One more for the clocks of two brokers, as in
		// TestRateLimitHoldsOverTenSeconds.
		most := burst + int(perSecond*(window+tokenHorizon+100*time.Millisecond).Seconds()) + 1
		for i := range starts {
			n := sort.Search(len(starts), func(j int) bool { return starts[j].Sub(starts[i]) >= window })
			require.LessOrEqual(t, n-i, most, "%d attempts started within %s (at most %d)", n-i, window, most)
		}
	}
	require.GreaterOrEqual(t, len(starts), perSecond*4/4, "the rate was reached")
}

// A broker's batch of a rate key's tokens: as many as its recent starts
// take in tokenHorizon, never more than tokenHorizon's worth of the rate;
// handed out only to starts of the batch's horizon (one whose time is
// before the batch was taken asks the bucket for one token, leaving the
// batch be); dropped when it lapses.
func TestTokenBatchesAreTheHorizonsWorth(t *testing.T) {
	t.Parallel()
	var tb tokenBatches
	t0 := time.Now()
	ok, want := tb.take("k", 1000, t0)
	require.False(t, ok)
	require.Equal(t, 1, want, "no recent starts: one")
	// 400 starts a second for two seconds: a batch is 20.
	at := t0
	for i := range 800 {
		at = t0.Add(time.Duration(i) * 2500 * time.Microsecond)
		if ok, _ := tb.take("k", 1000, at); !ok {
			tb.took("k", 1, at)
		}
	}
	_, want = tb.take("k", 1000, at)
	require.InDelta(t, 20, want, 2)
	_, capped := tb.take("k", 100, at)
	require.Equal(t, 5, capped, "at most tokenHorizon's worth of the rate")

	tb.took("k", 4, at) // one handed out, 3 left
	ok, _ = tb.take("k", 1000, at.Add(-time.Millisecond))
	require.False(t, ok, "a start before the batch takes from the bucket")
	tb.took("k", 1, at.Add(-time.Millisecond))
	for range 3 {
		ok, _ = tb.take("k", 1000, at.Add(tokenHorizon/2))
		require.True(t, ok)
	}
	ok, _ = tb.take("k", 1000, at.Add(tokenHorizon/2))
	require.False(t, ok, "the batch is used up")

	tb.took("k", 4, at)
	ok, _ = tb.take("k", 1000, at.Add(tokenHorizon))
	require.False(t, ok, "lapsed at its horizon")
	ok, _ = tb.take("k", 1000, at.Add(tokenHorizon/2))
	require.False(t, ok, "and dropped")
}

// A spare is handed on only to a start under the limit it was taken under
// (a lowered limit is judged by a take, not skipped by a hand-on), only
// while it is held for at least the window asked, and only once.
func TestASpareIsHandedOnUnderItsLimitWhileHeldLongEnoughOnce(t *testing.T) {
	t.Parallel()
	p := &placeQueues{delay: time.Hour}
	now := time.Now()
	p.spare(context.Background(), "k", spare{holder: "a", until: now.Add(10 * time.Second), limit: 2})
	_, ok := p.spareFor("k", 1, now, time.Second)
	require.False(t, ok, "the key's limit changed")
	_, ok = p.spareFor("k", 2, now.Add(9500*time.Millisecond), time.Second)
	require.False(t, ok, "held for less than the window")
	_, ok = p.spareFor("other", 2, now, time.Second)
	require.False(t, ok, "another key")
	sp, ok := p.spareFor("k", 2, now, time.Second)
	require.True(t, ok)
	require.Equal(t, "a", sp.holder)
	_, ok = p.spareFor("k", 2, now, time.Second)
	require.False(t, ok, "handed on once")
	require.Zero(t, p.waitingGives())
}

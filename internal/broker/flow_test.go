package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// declareFlow declares a type whose params hold a customer, with flow.
func (tb *testBundle) declareFlow(t *testing.T, name string, flow api.Flow) {
	t.Helper()
	r := tb.ask(t, credA, name, wire.OpDeclare, wire.DeclareRequest{Worker: "w", Type: wire.Declaration{
		Name: name, Schema: json.RawMessage(`{"type":"object","properties":{"customer":{"type":"string","maxLength":16}},"additionalProperties":false}`),
		TimeoutSeconds: 60, Attempts: 2, MaxResultBytes: 1 << 20, ContentType: "text/plain", Flow: flow,
	}})
	require.Nil(t, r.Error, "declared")
}

// admitJob admits a job of typ for tenant with params and priority, and
// publishes its work as the relay does.
func (tb *testBundle) admitJob(t *testing.T, typ, tenant, key, params string, priority int) *job.Record {
	t.Helper()
	now := time.Now().UTC()
	rec := &job.Record{ID: job.DeriveID(tb.env.Secret, tenant, "reviewer-47", key), Tenant: tenant, Requester: "reviewer-47",
		KeyHash: job.HashKey(key), Fingerprint: "f-" + key, Type: typ, Params: json.RawMessage(params), Priority: priority,
		State: job.StateQueued, CreatedAt: now, UpdatedAt: now, MaxAttempts: 3, TimeoutSeconds: 60}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, tb.conn.Res.Jobs.Create(ctx, rec))
	require.NoError(t, tb.conn.Res.Work.Publish(ctx, rec, 0))
	return rec
}

// span is one attempt as its worker saw it: from the claim's answer to
// the done request's sending.
type span struct {
	customer   string
	start, end time.Time
}

// A concurrency key's limit of 1 holds across two brokers answering the
// same workers under load: every start and end is recorded, no two jobs
// of one customer ever run at once, and the customers run beside each
// other (the key limits a customer, not the type).
func TestConcurrencyKeyLimitHoldsAcrossTwoBrokers(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	tb.broker(t, true) // a second broker in the queue group: requests go to either
	tb.declareFlow(t, "export", api.Flow{Concurrency: []api.ConcurrencyKey{{Key: "/params/customer", Limit: 1}}})
	customers := []string{"c1", "c2", "c3"}
	const perCustomer = 8
	params := map[string]string{}
	for i := range perCustomer {
		for _, c := range customers {
			rec := tb.admitJob(t, "export", "4", fmt.Sprintf("%s-%d", c, i), `{"customer":"`+c+`"}`, 0)
			params[rec.Key()] = c
		}
	}
	var mu sync.Mutex
	var spans []span
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				finished := len(spans) == perCustomer*len(customers)
				mu.Unlock()
				if finished {
					return
				}
				r := tb.ask(t, credA, "export", wire.OpNext, wire.NextRequest{Worker: fmt.Sprintf("w%d", w), WaitMS: 500})
				if r.Error != nil || r.Job == nil {
					continue
				}
				s := span{customer: params[r.Job.Key], start: time.Now()}
				time.Sleep(time.Duration(20+rand.IntN(30)) * time.Millisecond) // the attempt's work
				s.end = time.Now()
				d := tb.ask(t, credA, "export", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: r.Job.Key, Token: r.Job.Token}})
				require.Nil(t, d.Error)
				mu.Lock()
				spans = append(spans, s)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, spans, perCustomer*len(customers), "every job ran")
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	overlapAcross := false
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if b.start.After(a.end) {
				break
			}
			require.NotEqual(t, a.customer, b.customer, "two jobs of customer %s ran at once: %v–%v and %v–%v", a.customer, a.start, a.end, b.start, b.end)
			overlapAcross = true
		}
	}
	require.True(t, overlapAcross, "different customers ran beside each other")
	// Every place was given back: no customer's entry holds one.
	for _, c := range customers {
		k := job.ConcurrencyKeyOf("export", api.ConcurrencyKey{Key: "/params/customer", Limit: 1},
			&job.Record{Tenant: "4", Params: json.RawMessage(`{"customer":"` + c + `"}`)})
		requirePlacesGivenBack(t, tb, k.Key, "customer "+c)
	}
}

// requirePlacesGivenBack waits for key's places to be given back: a
// broker writes a place given back with the next write on its key, or
// within releaseDelay.
func requirePlacesGivenBack(t *testing.T, tb *testBundle, key, what string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		n, err := tb.conn.Res.Slots.Leased(context.Background(), key, time.Now())
		require.NoError(t, err)
		if n == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s's place was given back (%d held)", what, n)
		time.Sleep(5 * time.Millisecond)
	}
}

// A place whose holder died without giving it back (its broker took it
// and stopped before writing the claim) comes back within SlotTTL: the
// job it would have started starts on the other broker within 30 s.
func TestConcurrencyPlaceComesBackAfterItsBrokerDies(t *testing.T) {
	t.Parallel()
	first, tb := setup(t)
	tb.declareFlow(t, "export", api.Flow{Concurrency: []api.ConcurrencyKey{{Key: "tenant", Limit: 1}}})
	rec := tb.admitJob(t, "export", "4", "k-1", `{"customer":"c1"}`, 0)
	// The first broker takes the tenant's place and dies before its claim
	// is written: nothing gives the place back.
	died, over := make(chan struct{}), make(chan struct{})
	var once sync.Once
	first.beforeClaimWrite = func(string) {
		once.Do(func() {
			first.stores.Conn.Close() // as if the process were killed
			close(died)
			<-over // the request never ends while the test runs
		})
	}
	t.Cleanup(func() { close(over) }) // before the broker's Stop, which waits for it
	go func() {                       // its answer never comes
		data, _ := json.Marshal(wire.NextRequest{Worker: "w-dead", WaitMS: 2000})
		_, _ = tb.conn.NC.Request(wire.Subject(credA, "export", wire.OpNext), data, 15*time.Second)
	}()
	select {
	case <-died:
	case <-time.After(20 * time.Second):
		t.Fatal("the first broker never took the place")
	}
	k := job.ConcurrencyKeyOf("export", api.ConcurrencyKey{Key: "tenant", Limit: 1}, rec)
	n, err := tb.conn.Res.Slots.Leased(context.Background(), k.Key, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, n, "the dead broker holds the tenant's place")
	began := time.Now()
	tb.broker(t, true)
	var a *wire.Assignment
	for a == nil && time.Since(began) < 40*time.Second {
		r := tb.ask(t, credA, "export", wire.OpNext, wire.NextRequest{Worker: "w-live", WaitMS: 2000})
		require.Nil(t, r.Error)
		a = r.Job
	}
	require.NotNil(t, a, "the job started on the live broker")
	require.Equal(t, rec.Key(), a.Key)
	took := time.Since(began)
	require.Less(t, took, 30*time.Second, "the place came back within 30 s")
	require.Greater(t, took, 10*time.Second, "the place was held until its lease ran out, not taken at once")
}

// A rate limit holds across two brokers, measured over 10 s: however many
// workers ask, the attempts started in any window of k seconds are at most
// the burst and k seconds' worth, and the rate is reached, not starved.
func TestRateLimitHoldsOverTenSeconds(t *testing.T) {
	_, tb := setup(t)
	tb.broker(t, true)
	const perSecond, burst = 5, 2
	tb.declareFlow(t, "partner_call", api.Flow{RateLimit: &api.RateLimit{PerSecond: perSecond, Burst: burst}})
	for i := range 120 {
		tb.admitJob(t, "partner_call", fmt.Sprint(i%3), fmt.Sprintf("p-%d", i), `{}`, 0)
	}
	const measure = 10 * time.Second
	starts := startsUnder(t, tb, "partner_call", 6, 300, measure)
	// One more for the clocks of two brokers: a claim's start is its
	// broker's now, the bucket's the latest writer's.
	for k := 1; k <= 10; k++ {
		window := time.Duration(k) * time.Second
		most := burst + perSecond*k + 1
		for i := range starts {
			n := sort.Search(len(starts), func(j int) bool { return starts[j].Sub(starts[i]) >= window })
			require.LessOrEqual(t, n-i, most, "%d attempts started within %s (at most %d)", n-i, window, most)
		}
	}
	require.GreaterOrEqual(t, len(starts), perSecond*10*7/10, "the rate was reached")
}

// startsUnder has workers of typ (each with its own name, as many as
// workers) take jobs and finish them at once for measure, asking with
// wait_ms, and returns when each attempt started, in order, as the broker
// that claimed it recorded it (the answers reach the workers later, and
// not evenly on a loaded machine).
func startsUnder(t *testing.T, tb *testBundle, typ string, workers int, waitMS int64, measure time.Duration) []time.Time {
	t.Helper()
	var mu sync.Mutex
	var started []string
	began := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(began) < measure {
				r := tb.ask(t, credA, typ, wire.OpNext, wire.NextRequest{Worker: fmt.Sprintf("w%d", w), WaitMS: waitMS})
				if r.Error != nil || r.Job == nil {
					continue
				}
				d := tb.ask(t, credA, typ, wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: r.Job.Key, Token: r.Job.Token}})
				require.Nil(t, d.Error)
				mu.Lock()
				started = append(started, r.Job.Key)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	starts := make([]time.Time, 0, len(started))
	for _, key := range started {
		starts = append(starts, tb.record(t, key).Attempts[0].StartedAt)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	t.Logf("%d attempts started in %s", len(starts), measure)
	return starts
}

// The retry policy a type declares spaces its retries with full jitter:
// each pause is within [0, min(max, initial·multiplierⁿ⁻¹)), and the
// pauses differ.
func TestRetryPolicyDelaysWithFullJitter(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	r := tb.ask(t, credA, "flaky", wire.OpDeclare, wire.DeclareRequest{Worker: "w", Type: wire.Declaration{
		Name: "flaky", Schema: json.RawMessage(`{"type":"object","additionalProperties":false}`),
		TimeoutSeconds: 60, Attempts: 3, MaxResultBytes: 1 << 20, ContentType: "text/plain",
		Flow: api.Flow{Retry: &api.RetryPolicy{InitialSeconds: 0.4, MaxSeconds: 0.6, Multiplier: 2}},
	}})
	require.Nil(t, r.Error)
	const jobs = 24
	for i := range jobs {
		tb.admitJob(t, "flaky", "4", fmt.Sprintf("f-%d", i), `{}`, 0)
	}
	pauses := map[int][]time.Duration{}
	deadline := time.Now().Add(60 * time.Second)
	for len(pauses[1]) < jobs || len(pauses[2]) < jobs {
		require.True(t, time.Now().Before(deadline), "every job retried twice")
		a := tb.next(t, credA, "flaky", "w")
		if a.Attempt > 2 {
			d := tb.ask(t, credA, "flaky", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: a.Key, Token: a.Token}})
			require.Nil(t, d.Error)
			continue
		}
		f := tb.ask(t, credA, "flaky", wire.OpFail, wire.FailRequest{Held: wire.Held{Key: a.Key, Token: a.Token}, Kind: wire.KindError, Message: "partner down"})
		require.Nil(t, f.Error)
		rec := tb.record(t, a.Key)
		require.NotNil(t, rec.RetryAt)
		pauses[a.Attempt] = append(pauses[a.Attempt], rec.RetryAt.Sub(rec.UpdatedAt))
	}
	for n, ceil := range map[int]time.Duration{1: 400 * time.Millisecond, 2: 600 * time.Millisecond} {
		distinct := map[time.Duration]bool{}
		short := 0
		for _, p := range pauses[n] {
			require.GreaterOrEqual(t, p, time.Duration(0))
			require.Less(t, p, ceil, "the pause after attempt %d is below %s", n, ceil)
			distinct[p] = true
			if p < ceil/2 {
				short++
			}
		}
		require.Greater(t, len(distinct), len(pauses[n])/2, "the pauses after attempt %d are jittered", n)
		require.True(t, short > 0 && short < len(pauses[n]), "the pauses after attempt %d spread over [0, %s): %v", n, ceil, pauses[n])
	}
}

// With one slot (one worker taking one job at a time), a tenant's waiting
// jobs are taken in priority order, 1 first, first come first within a
// priority, however they were admitted.
func TestPriorityOrderWithOneSlot(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	tb.declareFlow(t, "report", api.Flow{})
	prios := []int{5, 3, 1, 4, 0, 2, 1, 5, 3, 2, 4, 1}
	want := map[string]int{}
	for i, p := range prios {
		rec := tb.admitJob(t, "report", "4", fmt.Sprintf("r-%d", i), `{}`, p)
		want[rec.Key()] = i
	}
	got := takeAll(t, tb, "report", len(prios))
	order := make([]int, len(got))
	for i, key := range got {
		order[i] = want[key]
	}
	require.Equal(t, []int{2, 6, 11, 5, 9, 1, 4, 8, 3, 10, 0, 7}, order, "by priority, then admission")
}

// With a concurrency limit of 1 on the tenant, the jobs that waited for
// the place are started in priority order as it frees.
func TestPriorityOrderWaitingForAConcurrencyPlace(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	tb.declareFlow(t, "report", api.Flow{Concurrency: []api.ConcurrencyKey{{Key: "tenant", Limit: 1}}})
	first := tb.admitJob(t, "report", "4", "r-first", `{}`, 0)
	a := tb.next(t, credA, "report", "w")
	require.Equal(t, first.Key(), a.Key)
	prios := []int{5, 3, 1, 4, 2}
	want := map[string]int{}
	for i, p := range prios {
		want[tb.admitJob(t, "report", "4", fmt.Sprintf("r-%d", i), `{}`, p).Key()] = p
	}
	// They all meet the full place and wait.
	r := tb.ask(t, credA, "report", wire.OpNext, wire.NextRequest{Worker: "w2", WaitMS: 1500})
	require.Nil(t, r.Error)
	require.Nil(t, r.Job, "the tenant's place is taken")
	d := tb.ask(t, credA, "report", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: a.Key, Token: a.Token}})
	require.Nil(t, d.Error)
	got := takeAll(t, tb, "report", len(prios))
	order := make([]int, len(got))
	for i, key := range got {
		order[i] = want[key]
	}
	require.Equal(t, []int{1, 2, 3, 4, 5}, order)
}

// takeAll takes n jobs of typ one at a time, each done before the next is
// asked for, and returns their keys in the order taken.
func takeAll(t *testing.T, tb *testBundle, typ string, n int) []string {
	t.Helper()
	var keys []string
	for range n {
		a := tb.next(t, credA, typ, "w")
		keys = append(keys, a.Key)
		d := tb.ask(t, credA, typ, wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: a.Key, Token: a.Token}})
		require.Nil(t, d.Error)
	}
	return keys
}

// A claim whose answer was lost holds the job's concurrency place; handed
// out again as the same attempt, the new claim keeps that place (its
// record names it), and one place is held, not two.
func TestALostClaimsPlaceMovesToTheClaimHandedOutAgain(t *testing.T) {
	t.Parallel()
	tb, b, decl, rec := oneLimitedJob(t, "lost-place")
	ctx := context.Background()
	writes := 0
	b.afterClaimWrite = func(string) error {
		if writes++; writes == 1 {
			return errors.New("timeout: the store's leader stopped")
		}
		return nil
	}
	first := b.claim(ctx, decl, rec.Key(), 1, "renderer-a")
	require.Equal(t, verdictNak, first.verdict, "no answer: no assignment")
	second := b.claim(ctx, decl, rec.Key(), 2, "renderer-b")
	require.Equal(t, verdictRun, second.verdict, "%s", second.why)
	require.Equal(t, 1, second.rec.Attempt, "the lost claim's attempt, handed out again")
	k := job.ConcurrencyKeyOf(decl.Name, decl.Concurrency[0], second.rec)
	n, err := tb.conn.Res.Slots.Leased(ctx, k.Key, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, n, "one place, the new claim's")
	require.NotEmpty(t, second.rec.Place, "the new claim's record names the place it kept")
	require.NotEqual(t, second.rec.ClaimID, second.rec.Place)
	require.NoError(t, tb.conn.Res.Slots.Lease(ctx, k.Key, 1, second.rec.PlaceHolder(), time.Now()), "held by the claim handed out")
	stored := tb.record(t, rec.Key())
	require.Equal(t, second.rec.Place, stored.Place, "and so does the stored record, for other brokers to renew it by")
}

// Many jobs waiting on one full key cost about one look a probe interval,
// not one each: over three seconds in which every parked job comes due
// six times (the backstop shortened to 500 ms here), the work stream is
// read a handful of times, not for each job, while a worker keeps asking.
func TestJobsWaitingOnAFullKeyCostOneProbe(t *testing.T) {
	old := parkBackstop
	parkBackstop = 500 * time.Millisecond
	t.Cleanup(func() { parkBackstop = old })
	_, tb := setup(t)
	tb.declareFlow(t, "export", api.Flow{Concurrency: []api.ConcurrencyKey{{Key: "tenant", Limit: 1}}})
	const waiting = 200
	for i := range waiting {
		tb.admitJob(t, "export", "4", fmt.Sprintf("w-%d", i), `{}`, 0)
	}
	// The tenant's only place is held by someone else for the whole test.
	ctx := context.Background()
	k := job.ConcurrencyKeyOf("export", api.ConcurrencyKey{Key: "tenant", Limit: 1}, &job.Record{Tenant: "4"})
	require.NoError(t, tb.conn.Res.Slots.Lease(ctx, k.Key, 1, "elsewhere", time.Now()))
	ask := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			r := tb.ask(t, credA, "export", wire.OpNext, wire.NextRequest{Worker: "w", WaitMS: 300})
			require.Nil(t, r.Error)
			require.Nil(t, r.Job, "the tenant's place is taken")
		}
	}
	ask(2 * time.Second) // every job read once and parked
	reads := tb.env.CountReads(t, "JOBGATE_WORK")
	ask(3 * time.Second)
	require.NoError(t, tb.conn.Res.Slots.Lease(ctx, k.Key, 1, "elsewhere", time.Now())) // still held
	t.Logf("%d reads of the work stream in 3 s for %d parked jobs", reads.Load(), waiting)
	require.Less(t, reads.Load(), int64(30), "the parked jobs wait without reads")
	// Once the place is given back, the jobs start again.
	require.NoError(t, tb.conn.Res.Slots.Unlease(ctx, k.Key, "elsewhere", time.Now()))
	a := tb.next(t, credA, "export", "w")
	require.NotNil(t, a)
}

// A canceled job holds no place: its worker's next beat, answered lost
// (canceled), gives back the places of its claim.
func TestACanceledJobsPlaceIsGivenBackAtItsWorkersBeat(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	tb.declareFlow(t, "export", api.Flow{Concurrency: []api.ConcurrencyKey{{Key: "tenant", Limit: 1}}})
	rec := tb.admitJob(t, "export", "4", "c-1", `{}`, 0)
	a := tb.next(t, credA, "export", "w")
	ctx := context.Background()
	k := job.ConcurrencyKeyOf("export", api.ConcurrencyKey{Key: "tenant", Limit: 1}, rec)
	n, err := tb.conn.Res.Slots.Leased(ctx, k.Key, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, n, "the running job holds the tenant's place")
	_, err = tb.conn.Res.Jobs.Mutate(ctx, a.Key, func(r *job.Record) error { return r.Cancel(time.Now().UTC()) })
	require.NoError(t, err)
	r := tb.ask(t, credA, "export", wire.OpBeat, wire.BeatRequest{Held: wire.Held{Key: a.Key, Token: a.Token}})
	require.NotNil(t, r.Error)
	require.True(t, r.Canceled, "the beat says canceled")
	requirePlacesGivenBack(t, tb, k.Key, "the canceled job")
}

// A running job's beats renew its places: past SlotTTL from its claim, its
// place is still held (judged at a time moved by hand), so a long attempt
// never loses its place to a waiting job. A broker renews only when what it
// last renewed runs short (here: it forgot), each renewal a write.
func TestARunningJobsBeatsRenewItsPlace(t *testing.T) {
	t.Parallel()
	b, tb := setup(t)
	tb.declareFlow(t, "export", api.Flow{Concurrency: []api.ConcurrencyKey{{Key: "tenant", Limit: 1}}})
	rec := tb.admitJob(t, "export", "4", "b-1", `{}`, 0)
	a := tb.next(t, credA, "export", "w")
	claimed := tb.record(t, a.Key)
	k := job.ConcurrencyKeyOf("export", api.ConcurrencyKey{Key: "tenant", Limit: 1}, rec)
	at := claimed.Attempts[0].StartedAt.Add(natsjs.SlotTTL + 100*time.Millisecond)
	n, err := tb.conn.Res.Slots.Leased(context.Background(), k.Key, at)
	require.NoError(t, err)
	require.Zero(t, n, "the claim's place runs out SlotTTL after the claim")
	time.Sleep(300 * time.Millisecond) // a renewal later than the claim
	b.renewals.forget(claimed.ClaimID)
	r := tb.ask(t, credA, "export", wire.OpBeat, wire.BeatRequest{Held: wire.Held{Key: a.Key, Token: a.Token}})
	require.Nil(t, r.Error)
	n, err = tb.conn.Res.Slots.Leased(context.Background(), k.Key, at)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the place was renewed by the beat")
}

// An attempt's place that lapsed (its beats reached no broker that could
// write the store for SlotTTL) may have let another job of its key start:
// its next beat is answered lost and the job handed back, using up none of
// its attempts, instead of running on over the limit.
func TestABeatOfAnAttemptWhosePlaceLapsedIsLostAndTheJobHandedBack(t *testing.T) {
	t.Parallel()
	b, tb := setup(t)
	tb.declareFlow(t, "export", api.Flow{Concurrency: []api.ConcurrencyKey{{Key: "tenant", Limit: 1}}})
	rec := tb.admitJob(t, "export", "4", "l-1", `{}`, 0)
	a := tb.next(t, credA, "export", "w")
	require.NotNil(t, a)
	claimed := tb.record(t, a.Key)
	ctx := context.Background()
	k := job.ConcurrencyKeyOf("export", api.ConcurrencyKey{Key: "tenant", Limit: 1}, rec)
	// The place runs out (as if SlotTTL passed unrenewed) and another
	// attempt takes it.
	require.NoError(t, tb.conn.Res.Slots.Unlease(ctx, k.Key, claimed.ClaimID, time.Now()))
	require.NoError(t, tb.conn.Res.Slots.Lease(ctx, k.Key, 1, "elsewhere", time.Now()))
	b.renewals.forget(claimed.ClaimID)

	r := tb.ask(t, credA, "export", wire.OpBeat, wire.BeatRequest{Held: wire.Held{Key: a.Key, Token: a.Token}})
	require.NotNil(t, r.Error, "the beat is not answered ok")
	require.Equal(t, wire.CodeLost, r.Error.Code)
	after := tb.record(t, a.Key)
	require.Empty(t, after.Worker, "handed back: no worker holds it")
	require.Empty(t, after.ClaimID)
	require.Zero(t, after.AttemptsUsed(), "the lost attempt uses up none of the job's attempts")
	n, err := tb.conn.Res.Slots.Leased(ctx, k.Key, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, n, "the other holder keeps the place")
	// A done of the lost attempt is refused too.
	r = tb.ask(t, credA, "export", wire.OpDone, wire.DoneRequest{Held: wire.Held{Key: a.Key, Token: a.Token}})
	require.NotNil(t, r.Error)
	require.Equal(t, wire.CodeLost, r.Error.Code)
	// Once the place is free the job runs again.
	require.NoError(t, tb.conn.Res.Slots.Unlease(ctx, k.Key, "elsewhere", time.Now()))
	deadline := time.Now().Add(10 * time.Second)
	for {
		require.True(t, time.Now().Before(deadline), "the handed-back job ran again")
		if again := tb.ask(t, credA, "export", wire.OpNext, wire.NextRequest{Worker: "w2", WaitMS: 300}); again.Job != nil {
			require.Equal(t, a.Key, again.Job.Key)
			break
		}
	}
}

// An assignment and each beat answered ok say for how long the attempt is
// its worker's for sure: never past the claim's staleness, nor past its
// places' lease.
func TestAssignmentsAndBeatsCarryTheAttemptsLease(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	stale := testConfig().StaleAfter
	tb.declareFlow(t, "export", api.Flow{Concurrency: []api.ConcurrencyKey{{Key: "tenant", Limit: 1}}})
	tb.admitJob(t, "export", "4", "m-1", `{}`, 0)
	a := tb.next(t, credA, "export", "w")
	require.NotNil(t, a)
	require.Positive(t, a.LeaseMS)
	require.LessOrEqual(t, a.LeaseMS, stale.Milliseconds())
	time.Sleep(300 * time.Millisecond) // past beatLimit: the beat writes
	r := tb.ask(t, credA, "export", wire.OpBeat, wire.BeatRequest{Held: wire.Held{Key: a.Key, Token: a.Token}})
	require.Nil(t, r.Error)
	require.Greater(t, r.LeaseMS, (stale / 2).Milliseconds(), "a fresh beat renews the lease")
	require.LessOrEqual(t, r.LeaseMS, stale.Milliseconds())
}

// A changed policy applies to the jobs not started yet: a job waiting for
// the tenant's only place starts once the type is declared again with two.
func TestAChangedLimitAppliesToTheWaitingJobs(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	tb.declareFlow(t, "export", api.Flow{Concurrency: []api.ConcurrencyKey{{Key: "tenant", Limit: 1}}})
	first := tb.admitJob(t, "export", "4", "p-1", `{}`, 0)
	a := tb.next(t, credA, "export", "w")
	require.Equal(t, first.Key(), a.Key)
	second := tb.admitJob(t, "export", "4", "p-2", `{}`, 0)
	r := tb.ask(t, credA, "export", wire.OpNext, wire.NextRequest{Worker: "w2", WaitMS: 1000})
	require.Nil(t, r.Error)
	require.Nil(t, r.Job, "one place, taken")
	tb.declareFlow(t, "export", api.Flow{Concurrency: []api.ConcurrencyKey{{Key: "tenant", Limit: 2}}})
	// The first job beats on meanwhile: its claim stands.
	deadline := time.Now().Add(15 * time.Second)
	var b *wire.Assignment
	for b == nil {
		require.True(t, time.Now().Before(deadline), "the waiting job started under the new limit")
		require.Nil(t, tb.ask(t, credA, "export", wire.OpBeat, wire.BeatRequest{Held: wire.Held{Key: a.Key, Token: a.Token}}).Error)
		r := tb.ask(t, credA, "export", wire.OpNext, wire.NextRequest{Worker: "w2", WaitMS: 300})
		require.Nil(t, r.Error)
		b = r.Job
	}
	require.Equal(t, second.Key(), b.Key)
}

// A claim taken over (its worker went silent) keeps the place of the claim
// it replaces: renewed, named in its record, the key's one place. A
// takeover whose write loses to another write of the job (there, a beat;
// it might be the old attempt's verdict, which hands the place on) gives
// back nothing: the next try keeps the same place.
func TestATakeoverKeepsTheOldClaimsPlace(t *testing.T) {
	t.Parallel()
	tb, b, decl, rec := oneLimitedJob(t, "takeover-place")
	ctx := context.Background()
	first := b.claim(ctx, decl, rec.Key(), 1, "renderer-a")
	require.Equal(t, verdictRun, first.verdict, "%s", first.why)
	b.cfg.Now = func() time.Time { return time.Now().Add(2 * time.Second) } // the claim is stale
	lost := false
	b.beforeClaimWrite = func(key string) {
		if lost {
			return
		}
		lost = true
		_, err := tb.conn.Res.Jobs.Mutate(ctx, key, func(r *job.Record) error {
			at := time.Now().UTC()
			r.HeartbeatAt = &at
			return nil
		})
		require.NoError(t, err)
	}
	second := b.claim(ctx, decl, rec.Key(), 2, "renderer-b")
	require.True(t, lost, "the first try's write lost")
	require.Equal(t, verdictRun, second.verdict, "%s", second.why)
	require.Equal(t, 2, second.rec.Attempt, "a new attempt")
	require.Equal(t, first.rec.ClaimID, second.rec.Place, "the place of the claim taken over, kept")
	k := job.ConcurrencyKeyOf(decl.Name, decl.Concurrency[0], second.rec)
	n, err := tb.conn.Res.Slots.Leased(ctx, k.Key, b.cfg.Now())
	require.NoError(t, err)
	require.Equal(t, 1, n, "one place")
	require.False(t, second.placesUntil.IsZero())
}

// oneLimitedJob is a broker not started (its claims driven by hand) and
// one job committed under key, of a type limited to one at a time a tenant.
func oneLimitedJob(t *testing.T, key string) (*testBundle, *Broker, *job.TypeDecl, *job.Record) {
	t.Helper()
	env := jobtest.Start(t)
	tb := &testBundle{env: env, conn: env.Connect(t, "test")}
	b := tb.broker(t, false)
	decl := jobtest.PermitReport()
	decl.Concurrency = []api.ConcurrencyKey{{Key: "tenant", Limit: 1}}
	return tb, b, decl, env.Commit(t, tb.conn.Res, jobtest.Request{Key: key})
}

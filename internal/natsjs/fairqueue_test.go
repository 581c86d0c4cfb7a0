package natsjs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func fairQueueWith(weights map[string]int, tenants ...string) *FairQueue {
	q := &FairQueue{cfg: FairConfig{Weights: weights}, tenants: map[string]*tenantQueue{}}
	for _, name := range tenants {
		q.tenants[name] = &tenantQueue{name: name, weight: q.cfg.weight(name), pending: true, fresh: true}
	}
	return q
}

func picks(q *FairQueue, n int) []string {
	var out []string
	for range n {
		out = append(out, q.pick(nil).name)
	}
	return out
}

func TestPickSharesSlotsByWeight(t *testing.T) {
	t.Parallel()
	q := fairQueueWith(map[string]int{"heavy": 3}, "heavy", "light")
	got := picks(q, 8)
	count := map[string]int{}
	for _, name := range got {
		count[name]++
	}
	require.Equal(t, map[string]int{"heavy": 6, "light": 2}, count, "picks %v", got)
	for i := 0; i+3 < len(got); i++ {
		require.Contains(t, got[i:i+4], "light", "light waits at most 3 picks: %v", got)
	}
	require.Equal(t, []string{"a", "b", "a", "b"}, picks(fairQueueWith(nil, "a", "b"), 4))
}

func TestATenantWhoseWorkComesBackTakesTheNextPick(t *testing.T) {
	t.Parallel()
	q := fairQueueWith(nil, "flood")
	require.Equal(t, []string{"flood", "flood", "flood"}, picks(q, 3))
	// A tenant with work again (a scan marks it fresh) goes first, then
	// the two alternate.
	q.tenants["trickle"] = &tenantQueue{name: "trickle", weight: 1, pending: true, fresh: true}
	require.Equal(t, []string{"trickle", "flood", "trickle", "flood"}, picks(q, 4))
	q.tenants["trickle"].pending = false
	require.Equal(t, []string{"flood", "flood"}, picks(q, 2))
	q.tenants["trickle"].pending, q.tenants["trickle"].fresh = true, true
	require.Equal(t, "trickle", q.pick(nil).name)
	// No tenant with work: no pick.
	for _, tq := range q.tenants {
		tq.pending = false
	}
	require.Nil(t, q.pick(nil))
}

// withRequesters gives a tenant of q queues for requesters with work, as a
// scan would.
func withRequesters(q *FairQueue, tenant string, requesters ...string) {
	t := q.tenants[tenant]
	if t == nil {
		t = &tenantQueue{name: tenant, weight: q.cfg.weight(tenant), fresh: true}
		q.tenants[tenant] = t
	}
	if t.lanes == nil {
		t.lanes = map[string]*lane{}
	}
	with := map[string]bool{}
	for _, r := range requesters {
		with[r] = true
	}
	for r, l := range t.lanes {
		if l.pending {
			with[r] = true
		}
	}
	t.update(with, time.Now())
}

func lanePicks(q *FairQueue, n int) []string {
	var out []string
	for range n {
		l := q.pickLane(nil)
		out = append(out, l.tenant.name+"/"+l.requester)
	}
	return out
}

func TestRequestersOfATenantTakeItsTurnsRoundRobin(t *testing.T) {
	t.Parallel()
	q := fairQueueWith(nil)
	withRequesters(q, "A", "a1", "a2", "a3")
	withRequesters(q, "B", "b1")
	// Tenants alternate whatever their number of requesters; A's turns
	// go round its requesters.
	require.Equal(t, []string{"A/a1", "B/b1", "A/a2", "B/b1", "A/a3", "B/b1", "A/a1", "B/b1"}, lanePicks(q, 8))

	// A requester whose work runs out drops out of the round; one whose
	// work comes back takes its tenant's next turn.
	setPending(q.tenants["A"].lanes["a2"], false)
	require.Equal(t, []string{"A/a3", "B/b1", "A/a1", "B/b1", "A/a3"}, lanePicks(q, 5))
	withRequesters(q, "A", "a2")
	require.Equal(t, []string{"B/b1", "A/a2", "B/b1", "A/a1"}, lanePicks(q, 4))

	// A tenant alone with one requester gets every pick.
	solo := fairQueueWith(nil)
	withRequesters(solo, "C", "c1")
	require.Equal(t, []string{"C/c1", "C/c1", "C/c1"}, lanePicks(solo, 3))
}

func TestACappedTenantsRequestersShareOneQueue(t *testing.T) {
	t.Parallel()
	q := fairQueueWith(nil)
	q.tenants["A"] = &tenantQueue{name: "A", weight: 1, fresh: true, capped: true, lanes: map[string]*lane{}}
	withRequesters(q, "A", "a1", "a2")
	require.Len(t, q.tenants["A"].lanes, 1)
	require.Equal(t, []string{"A/", "A/"}, lanePicks(q, 2))
	require.False(t, (FairConfig{MaxRunningFor: map[string]int{"A": 0}, MaxRunning: 2}).Capped("A"))
	require.True(t, (FairConfig{MaxRunning: 2}).Capped("A"))
	require.True(t, (FairConfig{MaxRunningFor: map[string]int{"A": 1}}).Capped("A"))
}

func TestAProcessForgetsRequestersWithoutWork(t *testing.T) {
	t.Parallel()
	q := fairQueueWith(nil)
	now := time.Now()
	var many []string
	for i := range 100 {
		many = append(many, fmt.Sprintf("r%03d", i))
	}
	withRequesters(q, "A", many...)
	a := q.tenants["A"]
	require.Len(t, a.lanes, 100)
	require.True(t, a.pending)
	// The work runs out: only the idleRequesters most recently busy stay.
	for i, r := range many {
		a.lanes[r].seen = now.Add(time.Duration(i) * time.Millisecond)
	}
	a.update(map[string]bool{}, now.Add(time.Second))
	require.False(t, a.pending)
	require.Len(t, a.lanes, idleRequesters)
	require.Contains(t, a.lanes, "r099")
	// And none after keepIdle.
	a.update(nil, now.Add(keepIdle+time.Minute))
	require.Empty(t, a.lanes)
}

func TestRequesterConsumerNamesAreUnambiguous(t *testing.T) {
	t.Parallel()
	typ := strings.Repeat("t", 64)
	long := strings.Repeat("x", 64)
	a, b := RequesterWorkConsumerName(typ, "a-b", "c"), RequesterWorkConsumerName(typ, "a", "b-c")
	require.NotEqual(t, a, b)
	require.NotEqual(t, RequesterWorkConsumerName(typ, long, long), RequesterWorkConsumerName(typ, long, long[1:]))
	require.LessOrEqual(t, len(RequesterWorkConsumerName(typ, long, long)), 100)
	require.NotContains(t, a, ".")
	require.False(t, strings.HasPrefix(a, workConsumerPre))
}

// A process whose slots keep coming back for work while a large backlog is
// queued, and more work keeps arriving, spends a bounded share of its time
// listing the queue. Before listShare it listed without pause: every look
// saw a new publish, and each listing names every queued job (a core spent
// on it at 100,000 queued jobs).
func TestListingALargeBacklogTakesABoundedShareOfTheTime(t *testing.T) {
	t.Parallel()
	js := provisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	q, err := OpenFairQueue(ctx, js, FairConfig{Type: "permit_report", AckWait: time.Minute})
	require.NoError(t, err)

	const backlog = 2000
	for i := range backlog {
		_, err := js.PublishAsync(WorkSubject("permit_report", "flood", "r", fmt.Sprintf("job_%026d", i)), []byte("x"))
		require.NoError(t, err)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("backlog not stored")
	}

	start := time.Now()
	for n := backlog; time.Since(start) < 3*time.Second; n++ {
		_, err := js.Publish(ctx, WorkSubject("permit_report", "trickle", "r", fmt.Sprintf("job_%026d", n)), []byte("x"))
		require.NoError(t, err)
		require.NoError(t, q.scan(ctx))
	}
	elapsed := time.Since(start)
	q.mu.Lock()
	listed, took := q.listed, q.fullTook
	q.mu.Unlock()
	t.Logf("listed the queue for %v of %v (one listing: %v)", listed, elapsed, took)
	// At most a quarter in the long run; a window of a few listings can
	// hold one more (the first starts at once), and a loaded machine
	// slows listings: half is the bound, against 87–97% before listShare.
	require.Less(t, listed, elapsed/2, "listed the queue for %v of %v (one listing: %v)", listed, elapsed, took)
	require.ElementsMatch(t, []string{"flood", "trickle"}, q.Tenants(), "both tenants with work are found")
}

// A process learns of a tenant's new work as it is published, without a
// listing: a large backlog puts listings far apart (listShare).
func TestANewTenantsWorkIsNoticedWithoutAListing(t *testing.T) {
	t.Parallel()
	js := provisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := OpenFairQueue(ctx, js, FairConfig{Type: "permit_report", AckWait: time.Minute, MaxRunningFor: map[string]int{"capped": 1}})
	require.NoError(t, err)
	defer q.Close()

	// No Next, no scan: only the notices can tell.
	_, err = js.Publish(ctx, WorkSubject("permit_report", "newcomer", "r1", "job_a"), []byte("x"))
	require.NoError(t, err)
	_, err = js.Publish(ctx, WorkSubject("permit_report", "capped", "r2", "job_b"), []byte("x"))
	require.NoError(t, err)
	_, err = js.Publish(ctx, WorkSubject("other_type", "elsewhere", "r3", "job_c"), []byte("x"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(q.Tenants()) == 2 }, 5*time.Second, 5*time.Millisecond)
	require.ElementsMatch(t, []string{"newcomer", "capped"}, q.Tenants(), "the type's tenants, no other type's")
	q.mu.Lock()
	defer q.mu.Unlock()
	require.True(t, q.tenants["newcomer"].lanes["r1"].pending, "the requester's queue is pulled at the next pick")
	require.True(t, q.tenants["capped"].lanes[""].pending, "a capped tenant's one queue")
	require.Zero(t, q.listed, "no listing was made")
}

// provisioned is jobgate's layout on an embedded JetStream of its own.
func provisioned(t *testing.T) jetstream.JetStream {
	t.Helper()
	js := emptyJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Provision(ctx, js, DefaultLayout())
	require.NoError(t, err)
	return js
}

// emptyJetStream starts an embedded JetStream of its own, nothing
// provisioned, and returns a handle on it (EmptyJetStream to the package's
// external tests).
func emptyJetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	emb, err := StartEmbedded(EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(emb.Shutdown)
	nc, err := emb.Connect(t.Name())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

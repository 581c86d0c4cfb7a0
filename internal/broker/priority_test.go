package broker

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/stretchr/testify/require"
)

// admitJobAs admits a job of typ for requester of tenant with priority (0:
// none), and publishes its work as the relay does.
func (tb *testBundle) admitJobAs(t *testing.T, typ, tenant, requester, key string, priority int) *job.Record {
	t.Helper()
	now := time.Now().UTC()
	rec := &job.Record{ID: job.DeriveID(tb.env.Secret, tenant, requester, key), Tenant: tenant, Requester: requester,
		KeyHash: job.HashKey(key), Fingerprint: "f-" + key, Type: typ, Params: json.RawMessage(`{}`), Priority: priority,
		State: job.StateQueued, CreatedAt: now, UpdatedAt: now, MaxAttempts: 3, TimeoutSeconds: 60}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, tb.conn.Res.Jobs.Create(ctx, rec))
	require.NoError(t, tb.conn.Res.Work.Publish(ctx, rec, 0))
	return rec
}

// noticed waits until b's scheduler of typ knows that requester of tenant
// may have work of priority p (the notice of a job just admitted came).
func noticed(t *testing.T, b *Broker, typ, tenant, requester string, p int) {
	t.Helper()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		s := b.scheds[typ]
		b.mu.Unlock()
		if s == nil {
			return false
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		tq := s.tenants[tenant]
		if tq == nil || tq.lanes[requester] == nil {
			return false
		}
		l := tq.lanes[requester]
		return l.works.has(p) || len(l.ahead[p]) > 0
	}, 10*time.Second, 5*time.Millisecond, "the scheduler noticed %s's job of priority %d", requester, p)
}

// labels names the jobs taken, by key, as admitted.
type labels map[string]string

func (ls labels) add(rec *job.Record, label string) { ls[rec.Key()] = label }

func (ls labels) of(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = ls[k]
	}
	return out
}

// With one slot, a requester's priority-1 job submitted after another
// requester of the same tenant queued five priority-5 jobs runs next once
// the running job is done, though the other requester's turn has come
// (its lane was picked less recently); the rest then run as before.
func TestAPriorityJobOfAnotherRequesterOfTheTenantRunsNext(t *testing.T) {
	t.Parallel()
	b, tb := setup(t)
	tb.declareFlow(t, "report", api.Flow{})
	ls := labels{}
	for i := range 5 {
		ls.add(tb.admitJobAs(t, "report", "4", "alice", "a-"+strconv.Itoa(i), 5), "a"+strconv.Itoa(i))
	}
	ls.add(tb.admitJobAs(t, "report", "4", "bob", "b-0", 5), "b0")

	// Equal priorities: alice, then bob, whose job is running as the VIP's
	// comes in, so that alice's lane is the least recently picked.
	require.Equal(t, []string{"a0"}, ls.of(takeAll(t, tb, "report", 1)))
	running := tb.next(t, credA, "report", "w")
	require.Equal(t, "b0", ls[running.Key])
	held := wire.Held{Key: running.Key, Token: running.Token}
	ls.add(tb.admitJobAs(t, "report", "4", "bob", "b-vip", 1), "vip")
	noticed(t, b, "report", "4", "bob", 1)
	require.Nil(t, tb.ask(t, credA, "report", wire.OpBeat, wire.BeatRequest{Held: held}).Error)
	require.Nil(t, tb.ask(t, credA, "report", wire.OpDone, wire.DoneRequest{Held: held}).Error)

	require.Equal(t, []string{"vip", "a1", "a2", "a3", "a4"}, ls.of(takeAll(t, tb, "report", 5)),
		"the priority-1 job first, then alice's in admission order")
}

// Requesters of a tenant whose best waiting jobs share a priority still
// take turns; a requester whose best is worse waits until no better job of
// the tenant does.
func TestRequestersOfEqualPriorityStillTakeTurns(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	tb.declareFlow(t, "report", api.Flow{})
	ls := labels{}
	for i := range 3 {
		ls.add(tb.admitJobAs(t, "report", "4", "alice", "a-"+strconv.Itoa(i), 2), "a"+strconv.Itoa(i))
	}
	for i := range 2 {
		ls.add(tb.admitJobAs(t, "report", "4", "alice", "a-late-"+strconv.Itoa(i), 5), "a-late"+strconv.Itoa(i))
	}
	for i := range 2 {
		ls.add(tb.admitJobAs(t, "report", "4", "carol", "c-"+strconv.Itoa(i), 0), "c"+strconv.Itoa(i))
	}
	for i := range 3 {
		ls.add(tb.admitJobAs(t, "report", "4", "bob", "b-"+strconv.Itoa(i), 2), "b"+strconv.Itoa(i))
	}
	got := ls.of(takeAll(t, tb, "report", 10))
	require.Equal(t, []string{"a0", "b0", "a1", "b1", "a2", "b2", "c0", "c1", "a-late0", "a-late1"}, got,
		"priority 2 in turns, then carol's default priority, then alice's priority 5")
}

// Priorities order a tenant's own jobs only: another tenant keeps its
// turns of the weighted round-robin (here every other slot).
func TestPriorityWithinATenantLeavesAnotherTenantItsShare(t *testing.T) {
	t.Parallel()
	_, tb := setup(t)
	tb.declareFlow(t, "report", api.Flow{})
	ls := labels{}
	for i := range 4 {
		ls.add(tb.admitJobAs(t, "report", "4", "alice", "a-"+strconv.Itoa(i), 5), "4/a"+strconv.Itoa(i))
		ls.add(tb.admitJobAs(t, "report", "4", "bob", "b-"+strconv.Itoa(i), 1), "4/b"+strconv.Itoa(i))
		ls.add(tb.admitJobAs(t, "report", "5", "rita", "r-"+strconv.Itoa(i), 0), "5/r"+strconv.Itoa(i))
	}
	got := ls.of(takeAll(t, tb, "report", 12))
	require.Equal(t, []string{"4/b0", "5/r0", "4/b1", "5/r1", "4/b2", "5/r2", "4/b3", "5/r3", "4/a0", "4/a1", "4/a2", "4/a3"}, got,
		"tenant 5 every other slot while it has work; tenant 4's priority-1 jobs first")
}

// A requester ranked by a job this broker has only heard of (another
// broker ran it and removed its work before this one read it) is not
// taken at its worse priority in its stead: the read finds the job gone,
// and the tenant's requesters are ranked again.
func TestARequesterRankedByAJobGoneIsRankedAgain(t *testing.T) {
	t.Parallel()
	b, tb := setup(t)
	tb.declareFlow(t, "report", api.Flow{})
	ls := labels{}
	for i := range 2 {
		ls.add(tb.admitJobAs(t, "report", "4", "alice", "a-"+strconv.Itoa(i), 5), "a"+strconv.Itoa(i))
		ls.add(tb.admitJobAs(t, "report", "4", "bob", "b-"+strconv.Itoa(i), 2), "b"+strconv.Itoa(i))
	}
	require.Equal(t, []string{"b0"}, ls.of(takeAll(t, tb, "report", 1)))

	gone := tb.admitJobAs(t, "report", "4", "alice", "a-gone", 1)
	noticed(t, b, "report", "4", "alice", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lanes := tb.conn.Res.Work.Lanes("report")
	msgs, err := lanes.OldestBatchAt(ctx, "4", "alice", 1, 0, 1, 0)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, gone.Key(), msgs[0].Key)
	require.NoError(t, lanes.Remove(ctx, msgs[0].Seq), "the other broker's job ended")

	require.Equal(t, []string{"b1", "a0", "a1"}, ls.of(takeAll(t, tb, "report", 3)),
		"bob's priority 2 before alice's priority 5")
}

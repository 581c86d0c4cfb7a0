package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/jobtest"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/job"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// permitParams are the params of the records jobtest admits.
type permitParams struct {
	CaseID   int `json:"case_id"`
	Revision int `json:"revision"`
	Pages    int `json:"pages"`
}

var permitSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["case_id","revision"],` +
	`"properties":{"case_id":{"type":"integer","minimum":1},"revision":{"type":"integer","minimum":1},` +
	`"pages":{"type":"integer","minimum":1,"maximum":2000,"default":10}}}`)

// runs counts the handler calls per job and the jobs running now.
type runs struct {
	mu      sync.Mutex
	byID    map[string]int
	now     map[string]int // tenant → running now
	maxNow  map[string]int // tenant → most running at once
	total   atomic.Int64
	running atomic.Int64
}

func newRuns() *runs {
	return &runs{byID: map[string]int{}, now: map[string]int{}, maxNow: map[string]int{}}
}

func (r *runs) begin(tenant, id string) {
	r.mu.Lock()
	r.byID[id]++
	r.now[tenant]++
	r.maxNow[tenant] = max(r.maxNow[tenant], r.now[tenant])
	r.mu.Unlock()
	r.total.Add(1)
	r.running.Add(1)
}

func (r *runs) end(tenant string) {
	r.mu.Lock()
	r.now[tenant]--
	r.mu.Unlock()
	r.running.Add(-1)
}

func (r *runs) of(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[id]
}

func (r *runs) most(tenant string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxNow[tenant]
}

// startWorkers runs permit_report workers on a connection of their own;
// work is the handler.
func startWorkers(t *testing.T, env *jobtest.Env, name string, concurrency int, edit func(*worker.Config),
	work func(ctx context.Context, j *worker.Job[permitParams]) error) (*worker.Workers, *jobtest.Conn) {
	t.Helper()
	conn := env.Connect(t, name)
	cfg := worker.Config{
		Conn: conn.NC, Name: name, AckWait: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond,
		StaleAfter: time.Second, PullWait: 300 * time.Millisecond, DrainTimeout: time.Second,
	}
	if edit != nil {
		edit(&cfg)
	}
	w, err := worker.New(cfg)
	require.NoError(t, err)
	require.NoError(t, worker.Register(w, worker.Type[permitParams]{
		Name: "permit_report", Schema: permitSchema, Concurrency: concurrency, Timeout: time.Minute, Work: work,
	}))
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
	return w, conn
}

// gated is a handler whose jobs of one tenant wait for a token each (or the
// end of their context); every other tenant's jobs finish at once.
func gated(r *runs, slowTenant string, gate <-chan struct{}) func(ctx context.Context, j *worker.Job[permitParams]) error {
	return gatedIf(r, func(j *worker.Job[permitParams]) bool { return j.Tenant == slowTenant }, gate)
}

// gatedIf is gated for the jobs slow picks.
func gatedIf(r *runs, slow func(*worker.Job[permitParams]) bool, gate <-chan struct{}) func(ctx context.Context, j *worker.Job[permitParams]) error {
	return func(ctx context.Context, j *worker.Job[permitParams]) error {
		r.begin(j.Tenant, j.ID)
		defer r.end(j.Tenant)
		if slow(j) {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		_, err := j.Output().Write([]byte("%PDF " + j.ID))
		return err
	}
}

func admitMany(t *testing.T, env *jobtest.Env, conn *jobtest.Conn, tenant, prefix string, n int) []*job.Record {
	t.Helper()
	return admitManyAs(t, env, conn, tenant, "", prefix, n)
}

// admitManyAs admits n jobs of one requester ("": jobtest's default).
func admitManyAs(t *testing.T, env *jobtest.Env, conn *jobtest.Conn, tenant, requester, prefix string, n int) []*job.Record {
	t.Helper()
	recs := make([]*job.Record, n)
	for i := range recs {
		recs[i] = env.Admit(t, conn.Res, jobtest.Request{Tenant: tenant, Requester: requester, Key: jobtest.ID(prefix, i), Pages: 63})
	}
	return recs
}

func states(t *testing.T, conn *jobtest.Conn, recs []*job.Record) map[job.State]int {
	t.Helper()
	out := map[job.State]int{}
	for _, rec := range recs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cur, err := conn.Res.Jobs.Get(ctx, rec.Key())
		cancel()
		require.NoError(t, err)
		out[cur.State]++
	}
	return out
}

// waitUntil polls cond until it holds, failing the test at the deadline.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNow(t, "timed out waiting: "+what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestABacklogOfOneTenantDoesNotHoldUpAnother(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	r, gate := newRuns(), make(chan struct{})
	_, conn := startWorkers(t, env, "worker-1", 2, nil, gated(r, "A", gate))
	t.Cleanup(func() { close(gate) })

	backlog := admitMany(t, env, conn, "A", "a", 200)
	waitUntil(t, 30*time.Second, "both slots busy with A", func() bool { return r.running.Load() == 2 })
	later := admitMany(t, env, conn, "B", "b", 10)

	// A's jobs finish one at a time; B's work must get every other slot
	// that frees, not wait behind A's 198 queued jobs.
	deadline := time.Now().Add(90 * time.Second)
	for states(t, conn, later)[job.StateSucceeded] < len(later) {
		require.True(t, time.Now().Before(deadline), "B's jobs not done: %v", states(t, conn, later))
		select {
		case gate <- struct{}{}:
		case <-time.After(50 * time.Millisecond):
		}
	}
	a := states(t, conn, backlog)
	require.GreaterOrEqual(t, a[job.StateQueued], 170, "A's backlog still stands: %v", a)
	for _, rec := range later {
		require.Equal(t, 1, r.of(rec.ID), rec.ID)
	}
}

func TestATenantAloneUsesEverySlot(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	r, gate := newRuns(), make(chan struct{})
	_, conn := startWorkers(t, env, "worker-1", 4, nil, gated(r, "A", gate))
	recs := admitMany(t, env, conn, "A", "a", 12)
	waitUntil(t, 30*time.Second, "four of A's jobs running at once", func() bool { return r.running.Load() == 4 })
	close(gate)
	for _, rec := range recs {
		require.Equal(t, job.StateSucceeded, jobtest.Terminal(t, conn.Res, rec.Key(), 30*time.Second).State)
	}
	require.Equal(t, 4, r.most("A"))
}

func TestATenantCapLeavesTheOtherSlotsToOthers(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	r, gate := newRuns(), make(chan struct{})
	edit := func(c *worker.Config) { c.TenantMaxRunning = 1; c.TenantMaxRunningFor = map[string]int{"C": 0} }
	_, conn := startWorkers(t, env, "worker-1", 3, edit, gated(r, "A", gate))
	t.Cleanup(func() { close(gate) })
	backlog := admitMany(t, env, conn, "A", "a", 20)
	waitUntil(t, 30*time.Second, "one of A's jobs running", func() bool { return r.running.Load() == 1 })
	others := append(admitMany(t, env, conn, "B", "b", 5), admitMany(t, env, conn, "C", "c", 5)...)
	for _, rec := range others {
		require.Equal(t, job.StateSucceeded, jobtest.Terminal(t, conn.Res, rec.Key(), 30*time.Second).State)
	}
	require.Equal(t, 1, r.most("A"), "A never held more than its cap")
	require.Equal(t, 19, states(t, conn, backlog)[job.StateQueued])
}

func TestAJobOfAWorkerThatDiedIsTakenOver(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	r1, r2 := newRuns(), newRuns()
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	quick := func(c *worker.Config) {
		c.AckWait, c.HeartbeatInterval, c.StaleAfter = time.Second, 100*time.Millisecond, 500*time.Millisecond
	}
	_, conn1 := startWorkers(t, env, "worker-1", 1, quick, gated(r1, "A", hang))
	rec := env.Admit(t, conn1.Res, jobtest.Request{Tenant: "A", Key: "dies"})
	waitUntil(t, 30*time.Second, "worker-1 running the job", func() bool { return r1.running.Load() == 1 })

	// worker-1's process dies: its connection drops mid-job.
	conn1.NC.Close()
	_, conn2 := startWorkers(t, env, "worker-2", 1, quick, gated(r2, "nobody", nil))
	done := jobtest.Terminal(t, conn2.Res, rec.Key(), 30*time.Second)
	require.Equal(t, job.StateSucceeded, done.State)
	require.Equal(t, 2, done.Attempt)
	require.Equal(t, "worker-2", done.Worker)
	require.Equal(t, 1, r2.of(rec.ID))
}

func TestTwoWorkerProcessesRunEachJobOnce(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	r := newRuns()
	work := func(ctx context.Context, j *worker.Job[permitParams]) error {
		r.begin(j.Tenant, j.ID)
		defer r.end(j.Tenant)
		time.Sleep(5 * time.Millisecond)
		return nil
	}
	startWorkers(t, env, "worker-1", 2, nil, work)
	_, conn := startWorkers(t, env, "worker-2", 2, nil, work)
	var recs []*job.Record
	for _, tenant := range []string{"A", "B", "C"} {
		recs = append(recs, admitMany(t, env, conn, tenant, "job-"+tenant, 20)...)
	}
	for _, rec := range recs {
		done := jobtest.Terminal(t, conn.Res, rec.Key(), 60*time.Second)
		require.Equal(t, job.StateSucceeded, done.State, rec.ID)
		require.Equal(t, 1, done.Attempt, rec.ID)
	}
	for _, rec := range recs {
		require.Equal(t, 1, r.of(rec.ID), "job %s ran more than once", rec.ID)
	}
	require.Equal(t, int64(len(recs)), r.total.Load())
}

func TestWorkFlowsAfterATenantsConsumerIsRemoved(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	r := newRuns()
	_, conn := startWorkers(t, env, "worker-1", 2, nil, gated(r, "nobody", nil))
	first := env.Admit(t, conn.Res, jobtest.Request{Tenant: "A", Key: "first"})
	require.Equal(t, job.StateSucceeded, jobtest.Terminal(t, conn.Res, first.Key(), 30*time.Second).State)

	// Idle consumers are removed by the server (or an operator): here the
	// one of the requester's queue (jobtest's default requester).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, conn.Res.JS.DeleteConsumer(ctx, natsjs.StreamWork,
		natsjs.RequesterWorkConsumerName("permit_report", "A", first.Requester)))
	second := env.Admit(t, conn.Res, jobtest.Request{Tenant: "A", Key: "second"})
	require.Equal(t, job.StateSucceeded, jobtest.Terminal(t, conn.Res, second.Key(), 30*time.Second).State)
}

func TestWorkQueuedUnderTheFormerPerTypeConsumerIsDone(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	conn := env.Connect(t, "old-version")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// An earlier version's single consumer of the type, holding a job it
	// delivered to a worker that is gone.
	old, err := conn.Res.JS.CreateOrUpdateConsumer(ctx, natsjs.StreamWork, jetstream.ConsumerConfig{
		Durable: natsjs.WorkConsumerName("permit_report"), FilterSubject: "jobgate.work.permit_report.>",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour, MaxDeliver: -1,
	})
	require.NoError(t, err)
	held := env.Admit(t, conn.Res, jobtest.Request{Tenant: "A", Key: "held"})
	waiting := env.Admit(t, conn.Res, jobtest.Request{Tenant: "B", Key: "waiting"})
	msg, err := old.Next(jetstream.FetchMaxWait(5 * time.Second))
	require.NoError(t, err)
	require.Contains(t, msg.Subject(), held.ID)

	r := newRuns()
	startWorkers(t, env, "worker-1", 2, nil, gated(r, "nobody", nil))
	for _, rec := range []*job.Record{held, waiting} {
		require.Equal(t, job.StateSucceeded, jobtest.Terminal(t, conn.Res, rec.Key(), 30*time.Second).State)
		require.Equal(t, 1, r.of(rec.ID))
	}
}

// A handler cannot be interrupted: with every regular slot held by one
// tenant's long jobs, another tenant's first job still starts at once, on a
// newcomer slot, and only one such job runs beyond the regular slots.
func TestANewcomersJobStartsWhileAnotherTenantHoldsEverySlot(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	r, gate := newRuns(), make(chan struct{})
	_, conn := startWorkers(t, env, "worker-1", 2, nil, gated(r, "A", gate))
	t.Cleanup(func() { close(gate) })

	backlog := admitMany(t, env, conn, "A", "a", 20)
	waitUntil(t, 30*time.Second, "both slots busy with A", func() bool { return r.running.Load() == 2 })
	// None of A's jobs ever ends here: B's jobs have no regular slot to
	// wait for.
	later := admitMany(t, env, conn, "B", "b", 3)
	for _, rec := range later {
		require.Equal(t, job.StateSucceeded, jobtest.Terminal(t, conn.Res, rec.Key(), 30*time.Second).State)
	}
	require.Equal(t, 2, r.most("A"), "A never got the newcomer slot")
	require.Equal(t, 1, r.most("B"))
	a := states(t, conn, backlog)
	require.Equal(t, 18, a[job.StateQueued], "A's backlog stands: %v", a)
}

// Without newcomer slots (-1), the same B job waits for a regular slot.
func TestWithoutNewcomerSlotsATenantWaitsForARegularSlot(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	r, gate := newRuns(), make(chan struct{})
	_, conn := startWorkers(t, env, "worker-1", 2, func(c *worker.Config) { c.NewcomerSlots = -1 }, gated(r, "A", gate))
	t.Cleanup(func() { close(gate) })
	admitMany(t, env, conn, "A", "a", 5)
	waitUntil(t, 30*time.Second, "both slots busy with A", func() bool { return r.running.Load() == 2 })
	b := admitMany(t, env, conn, "B", "b", 1)
	require.Never(t, func() bool { return states(t, conn, b)[job.StateSucceeded] == 1 }, 2*time.Second, 100*time.Millisecond)
}

// Within a tenant, requesters share the slots too: one requester's backlog
// does not hold up another requester of the same tenant.
func TestABacklogOfOneRequesterDoesNotHoldUpAnotherOfTheSameTenant(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	r, gate := newRuns(), make(chan struct{})
	slow := func(j *worker.Job[permitParams]) bool { return j.Requester == "a1" }
	_, conn := startWorkers(t, env, "worker-1", 2, nil, gatedIf(r, slow, gate))
	t.Cleanup(func() { close(gate) })

	backlog := admitManyAs(t, env, conn, "A", "a1", "a1", 200)
	waitUntil(t, 30*time.Second, "both slots busy with a1", func() bool { return r.running.Load() == 2 })
	later := admitManyAs(t, env, conn, "A", "a2", "a2", 10)

	// a1's jobs finish one at a time; a2's work must get every other slot
	// that frees, not wait behind a1's 198 queued jobs. The newcomer slot
	// does not help here: tenant A has jobs running.
	deadline := time.Now().Add(90 * time.Second)
	for states(t, conn, later)[job.StateSucceeded] < len(later) {
		require.True(t, time.Now().Before(deadline), "a2's jobs not done: %v", states(t, conn, later))
		select {
		case gate <- struct{}{}:
		case <-time.After(50 * time.Millisecond):
		}
	}
	a1 := states(t, conn, backlog)
	require.GreaterOrEqual(t, a1[job.StateQueued], 170, "a1's backlog still stands: %v", a1)
	for _, rec := range later {
		require.Equal(t, 1, r.of(rec.ID), rec.ID)
	}
}

// A cap holds across processes: a capped tenant's work stays on one
// consumer, whose MaxAckPending JetStream enforces for every worker, even
// with several requesters.
func TestATenantCapHoldsAcrossTwoWorkerProcesses(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	r, gate := newRuns(), make(chan struct{})
	t.Cleanup(func() { close(gate) })
	edit := func(c *worker.Config) { c.TenantMaxRunningFor = map[string]int{"A": 1} }
	_, conn := startWorkers(t, env, "worker-1", 2, edit, gated(r, "A", gate))
	startWorkers(t, env, "worker-2", 2, edit, gated(r, "A", gate))
	backlog := append(admitManyAs(t, env, conn, "A", "a1", "a1", 8), admitManyAs(t, env, conn, "A", "a2", "a2", 8)...)
	waitUntil(t, 30*time.Second, "one of A's jobs running", func() bool { return r.running.Load() == 1 })
	others := append(admitManyAs(t, env, conn, "B", "b1", "b1", 5), admitManyAs(t, env, conn, "B", "b2", "b2", 5)...)
	for _, rec := range others {
		require.Equal(t, job.StateSucceeded, jobtest.Terminal(t, conn.Res, rec.Key(), 30*time.Second).State)
	}
	require.Equal(t, 1, r.most("A"), "A never held more than its cap")
	require.Equal(t, len(backlog)-1, states(t, conn, backlog)[job.StateQueued])
}

// holdOne creates a consumer as another layout's workers would have, and
// takes one message from it for a worker that is gone (it is never acked).
func holdOne(t *testing.T, conn *jobtest.Conn, cfg jetstream.ConsumerConfig, want *job.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.AckWait = time.Hour
	c, err := conn.Res.JS.CreateOrUpdateConsumer(ctx, natsjs.StreamWork, cfg)
	require.NoError(t, err)
	msg, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
	require.NoError(t, err)
	require.Contains(t, msg.Subject(), want.ID)
}

func consumerExists(t *testing.T, conn *jobtest.Conn, name string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := conn.Res.JS.Consumer(ctx, natsjs.StreamWork, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false
	}
	require.NoError(t, err)
	return true
}

// A tenant's cap lifted (or an upgrade from the per-tenant queues): its
// work, queued and held under its tenant consumer, is done through its
// requesters' consumers, each job once.
func TestWorkQueuedUnderATenantConsumerIsDoneAfterTheSwitchToRequesterQueues(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	conn := env.Connect(t, "capped-before")
	held := env.Admit(t, conn.Res, jobtest.Request{Tenant: "A", Requester: "a1", Key: "held"})
	waiting := append(admitManyAs(t, env, conn, "A", "a1", "a1", 3), admitManyAs(t, env, conn, "A", "a2", "a2", 3)...)
	cfg := natsjs.FairConfig{Type: "permit_report", AckWait: time.Second, MaxRunning: 1, Inactive: time.Hour}
	holdOne(t, conn, cfg.TenantWorkConsumer("A"), held)

	r := newRuns()
	startWorkers(t, env, "worker-1", 2, nil, gated(r, "nobody", nil))
	for _, rec := range append(waiting, held) {
		require.Equal(t, job.StateSucceeded, jobtest.Terminal(t, conn.Res, rec.Key(), 30*time.Second).State, rec.ID)
		require.Equal(t, 1, r.of(rec.ID), rec.ID)
	}
	require.False(t, consumerExists(t, conn, natsjs.TenantWorkConsumerName("permit_report", "A")))
	require.True(t, consumerExists(t, conn, natsjs.RequesterWorkConsumerName("permit_report", "A", "a2")))
}

// A cap set on a tenant whose work is queued per requester: its work,
// queued and held under the requesters' consumers, is done through its
// tenant consumer, each job once, within the cap.
func TestWorkQueuedUnderRequesterConsumersIsDoneAfterACapIsSet(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	conn := env.Connect(t, "uncapped-before")
	held := env.Admit(t, conn.Res, jobtest.Request{Tenant: "A", Requester: "a1", Key: "held"})
	waiting := append(admitManyAs(t, env, conn, "A", "a1", "a1", 3), admitManyAs(t, env, conn, "A", "a2", "a2", 3)...)
	cfg := natsjs.FairConfig{Type: "permit_report", AckWait: time.Second, Inactive: time.Hour}
	holdOne(t, conn, cfg.RequesterWorkConsumer("A", "a1"), held)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := conn.Res.JS.CreateOrUpdateConsumer(ctx, natsjs.StreamWork, cfg.RequesterWorkConsumer("A", "a2"))
	require.NoError(t, err)

	r := newRuns()
	startWorkers(t, env, "worker-1", 2, func(c *worker.Config) { c.TenantMaxRunning = 1 }, gated(r, "nobody", nil))
	for _, rec := range append(waiting, held) {
		require.Equal(t, job.StateSucceeded, jobtest.Terminal(t, conn.Res, rec.Key(), 30*time.Second).State, rec.ID)
		require.Equal(t, 1, r.of(rec.ID), rec.ID)
	}
	require.Equal(t, 1, r.most("A"))
	for _, requester := range []string{"a1", "a2"} {
		require.False(t, consumerExists(t, conn, natsjs.RequesterWorkConsumerName("permit_report", "A", requester)))
	}
	require.True(t, consumerExists(t, conn, natsjs.TenantWorkConsumerName("permit_report", "A")))
}

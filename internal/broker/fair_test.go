package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/broker"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/test/brokertest"
	"github.com/jobgate/jobgate/test/jobtest"
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
		Conn: conn.NC, Name: name, Credential: wire.JobgateCredential, HeartbeatInterval: 200 * time.Millisecond,
		PullWait: 300 * time.Millisecond, DrainTimeout: time.Second,
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
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return w, conn
}

// start runs an embedded JetStream and jobgate's side of the worker
// protocol, whose scheduling edit tunes.
func start(t *testing.T, edit func(*broker.Config)) *jobtest.Env {
	t.Helper()
	env := jobtest.Start(t)
	cfg := broker.Config{BeatInterval: 200 * time.Millisecond, StaleAfter: time.Second, RetryBase: time.Second}
	if edit != nil {
		edit(&cfg)
	}
	brokertest.Start(t, env, cfg)
	return env
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
	env := start(t, nil)
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
	env := start(t, nil)
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
	env := start(t, func(c *broker.Config) { c.TenantMaxRunning = 1; c.TenantMaxRunningFor = map[string]int{"C": 0} })
	r, gate := newRuns(), make(chan struct{})
	_, conn := startWorkers(t, env, "worker-1", 3, nil, gated(r, "A", gate))
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
	env := start(t, func(c *broker.Config) { c.BeatInterval, c.StaleAfter = 100*time.Millisecond, 500*time.Millisecond })
	r1, r2 := newRuns(), newRuns()
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	quick := func(c *worker.Config) { c.HeartbeatInterval = 100 * time.Millisecond }
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
	env := start(t, nil)
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

// A handler cannot be interrupted: with every regular slot held by one
// tenant's long jobs, another tenant's first job still starts at once, on a
// newcomer slot, and only one such job runs beyond the regular slots.
func TestANewcomersJobStartsWhileAnotherTenantHoldsEverySlot(t *testing.T) {
	t.Parallel()
	env := start(t, nil)
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
	env := start(t, nil)
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
	env := start(t, nil)
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

// A cap holds across worker processes: jobgate schedules, and counts the
// tenant's held jobs, whatever process holds them, with several requesters.
func TestATenantCapHoldsAcrossTwoWorkerProcesses(t *testing.T) {
	t.Parallel()
	env := start(t, func(c *broker.Config) { c.TenantMaxRunningFor = map[string]int{"A": 1} })
	r, gate := newRuns(), make(chan struct{})
	t.Cleanup(func() { close(gate) })
	_, conn := startWorkers(t, env, "worker-1", 2, nil, gated(r, "A", gate))
	startWorkers(t, env, "worker-2", 2, nil, gated(r, "A", gate))
	backlog := append(admitManyAs(t, env, conn, "A", "a1", "a1", 8), admitManyAs(t, env, conn, "A", "a2", "a2", 8)...)
	waitUntil(t, 30*time.Second, "one of A's jobs running", func() bool { return r.running.Load() == 1 })
	others := append(admitManyAs(t, env, conn, "B", "b1", "b1", 5), admitManyAs(t, env, conn, "B", "b2", "b2", 5)...)
	for _, rec := range others {
		require.Equal(t, job.StateSucceeded, jobtest.Terminal(t, conn.Res, rec.Key(), 30*time.Second).State)
	}
	require.Equal(t, 1, r.most("A"), "A never held more than its cap")
	require.Equal(t, len(backlog)-1, states(t, conn, backlog)[job.StateQueued])
}

// Work held by the consumers of earlier versions (one per type, per
// tenant, per requester, each holding a message for a worker that is gone)
// is done, each job once, and the consumers are removed.
func TestWorkHeldByTheConsumersOfEarlierVersionsIsDone(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	conn := env.Connect(t, "old-version")
	held := env.Admit(t, conn.Res, jobtest.Request{Tenant: "A", Requester: "a1", Key: "held"})
	waiting := append(admitManyAs(t, env, conn, "A", "a1", "a1", 3), admitManyAs(t, env, conn, "B", "b1", "b1", 3)...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	old, err := conn.Res.JS.CreateOrUpdateConsumer(ctx, natsjs.StreamWork, jetstream.ConsumerConfig{
		Durable: natsjs.WorkConsumerName("permit_report"), FilterSubject: "jobgate.work.permit_report.A.>",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour, MaxDeliver: -1,
	})
	require.NoError(t, err)
	msg, err := old.Next(jetstream.FetchMaxWait(5 * time.Second))
	require.NoError(t, err)
	require.Contains(t, msg.Subject(), held.ID)
	_, err = conn.Res.JS.CreateOrUpdateConsumer(ctx, natsjs.StreamWork, jetstream.ConsumerConfig{
		Durable: natsjs.RequesterWorkConsumerName("permit_report", "B", "b1"), FilterSubject: "jobgate.work.permit_report.B.b1.>",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour, MaxDeliver: -1,
	})
	require.NoError(t, err)

	brokertest.Start(t, env, broker.Config{BeatInterval: 200 * time.Millisecond, StaleAfter: time.Second})
	r := newRuns()
	startWorkers(t, env, "worker-1", 2, nil, gated(r, "nobody", nil))
	for _, rec := range append(waiting, held) {
		require.Equal(t, job.StateSucceeded, jobtest.Terminal(t, conn.Res, rec.Key(), 30*time.Second).State, rec.ID)
		require.Equal(t, 1, r.of(rec.ID), rec.ID)
	}
	s, err := conn.Res.JS.Stream(ctx, natsjs.StreamWork)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Consumers, "no consumer is left on the work stream")
}

// Fairness costs no JetStream consumer per requester: a stream holds at
// most 1,000 consumers, and 1,300 requesters with one job each stalled 301
// of them for minutes behind it. Every job starts at once on an idle
// worker, and the work stream has no consumer at all.
func TestMoreRequestersThanAStreamHasConsumersAllRunAtOnce(t *testing.T) {
	t.Parallel()
	env := start(t, nil)
	r := newRuns()
	_, conn := startWorkers(t, env, "worker-1", 8, nil, gated(r, "nobody", nil))
	const n = 1300
	recs := make([]*job.Record, n)
	for i := range recs {
		recs[i] = env.Admit(t, conn.Res, jobtest.Request{Tenant: "T" + strconv.Itoa(i%7), Requester: "r" + strconv.Itoa(i),
			Key: "one", Pages: 1})
	}
	for _, rec := range recs {
		require.Equal(t, job.StateSucceeded, jobtest.Terminal(t, conn.Res, rec.Key(), 90*time.Second).State, rec.ID)
	}
	require.Equal(t, int64(n), r.total.Load())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := conn.Res.JS.Stream(ctx, natsjs.StreamWork)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Consumers)
}

// A handler that writes past the type's result limit, ignores the error and
// returns nil fails budget_exceeded: a result cut short is never a success.
// A permanent failure whose message holds a newline still fails the job
// with that message (its control characters as spaces).
func TestAWorkersVerdictsAreNeverLostOrCutShort(t *testing.T) {
	t.Parallel()
	env := start(t, nil)
	conn := env.Connect(t, "worker")
	w, err := worker.New(worker.Config{Conn: conn.NC, Name: "w", Credential: wire.JobgateCredential,
		HeartbeatInterval: 200 * time.Millisecond, PullWait: 300 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, worker.Register(w, worker.Type[permitParams]{Name: "permit_report", Schema: permitSchema,
		Timeout: time.Minute, MaxResultBytes: 1000,
		Work: func(_ context.Context, j *worker.Job[permitParams]) error {
			if j.Params.Pages == 1 {
				_, _ = j.Output().Write(make([]byte, 800))
				_, _ = j.Output().Write(make([]byte, 800)) // ErrResultTooLarge, ignored
				return nil
			}
			return worker.Permanent(errors.New("case 47:\nno revision 29"))
		}}))
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	big := env.Admit(t, conn.Res, jobtest.Request{Key: "too-large", Pages: 1})
	bad := env.Admit(t, conn.Res, jobtest.Request{Key: "newline", Pages: 2})
	done := jobtest.Terminal(t, conn.Res, big.Key(), 30*time.Second)
	require.Equal(t, job.StateFailed, done.State)
	require.Equal(t, job.CategoryBudgetExceeded, done.Error.Category)
	done = jobtest.Terminal(t, conn.Res, bad.Key(), 30*time.Second)
	require.Equal(t, job.StateFailed, done.State)
	require.Equal(t, 1, done.Attempt)
	require.Equal(t, "case 47: no revision 29", done.Error.Message)
}

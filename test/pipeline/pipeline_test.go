package pipeline

import (
	"context"
	"fmt"
	"github.com/jobgate/jobgate/internal/broker"
	"github.com/jobgate/jobgate/test/brokertest"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/dispatcher"
	"github.com/jobgate/jobgate/internal/failpoint"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/renderer"
	"github.com/jobgate/jobgate/system"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

type testBundle struct {
	env     *jobtest.Env
	conn    *jobtest.Conn
	mu      sync.Mutex
	renders map[string][]string // job id → "attempt@worker" of every render started
	// brokerOnce starts jobgate's side of the worker protocol with the
	// first worker, whose heartbeat sets its timings (a dispatcher runs
	// one more).
	brokerOnce sync.Once
}

// ensureBroker starts the test's broker: a claim silent for five beats is
// taken over, retries back off from ten.
func (b *testBundle) ensureBroker(t *testing.T, beat time.Duration) {
	b.brokerOnce.Do(func() {
		brokertest.Start(t, b.env, broker.Config{BeatInterval: beat, StaleAfter: 5 * beat,
			RetryBase: max(10*beat, time.Second), MaxAttempts: maxAttempts})
	})
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	env := jobtest.Start(t)
	return &testBundle{env: env, conn: env.Connect(t, "test"), renders: map[string][]string{}}
}

func (b *testBundle) rendered(_ context.Context, r *job.Record) {
	b.mu.Lock()
	b.renders[r.ID] = append(b.renders[r.ID], fmt.Sprintf("%d@%s", r.Attempt, r.Worker))
	b.mu.Unlock()
}

func (b *testBundle) rendersOf(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.renders[id])
}

func (b *testBundle) rendersLog(id string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.renders[id]...)
}

// Both sides agree on attempts and the render budget, as one deployment's
// settings make them.
const (
	maxAttempts   = 3
	renderTimeout = 10 * time.Second
)

func (b *testBundle) renderer(t *testing.T, name string, opts ...func(*renderer.Config)) *jobtest.Conn {
	t.Helper()
	conn := b.env.Connect(t, name)
	cfg := renderer.Config{
		Worker: name, Concurrency: 2, MaxAttempts: maxAttempts, RenderTimeout: renderTimeout,
		HeartbeatInterval: 100 * time.Millisecond, PullWait: 300 * time.Millisecond, DrainTimeout: 2 * time.Second, OnRender: b.rendered,
	}
	for _, o := range opts {
		o(&cfg)
	}
	b.ensureBroker(t, cfg.HeartbeatInterval)
	r, err := renderer.New(cfg, worker.Config{Conn: conn.NC})
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return conn
}

func (b *testBundle) dispatcher(t *testing.T, name string, opts ...func(*dispatcher.Config)) {
	t.Helper()
	cfg := dispatcher.Config{
		MaxAttempts: maxAttempts, RenderTimeout: renderTimeout, Grace: time.Second,
		SweepInterval: 100 * time.Millisecond,
		Broker: broker.Config{BeatInterval: 100 * time.Millisecond, StaleAfter: 500 * time.Millisecond,
			RetryBase: time.Second},
	}
	for _, o := range opts {
		o(&cfg)
	}
	d, err := dispatcher.New(cfg, system.DispatcherStores(b.env.Connect(t, name).Res), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, d.Start(context.Background()))
	t.Cleanup(func() { _ = d.Stop(context.Background()) })
}

func TestJobCommittedByACrashedGatewayRunsToSucceededOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// gateway.after-commit=exit: the record is committed, its work never
	// published, the client never answered.
	rec := b.env.Commit(t, b.conn.Res, jobtest.Request{Key: "r-63", Pages: 63})
	b.renderer(t, "renderer-a")
	b.dispatcher(t, "dispatcher-a")

	done := jobtest.Terminal(t, b.conn.Res, rec.Key(), 60*time.Second)
	require.Equal(t, job.StateSucceeded, done.State)
	require.Equal(t, 1, done.Attempt)
	require.Equal(t, 1, b.rendersOf(rec.ID))
	require.Equal(t, []string{rec.ID + ".a1"}, jobtest.Objects(t, b.conn.Res))
	events := jobtest.Events(t, b.conn.Res, rec)
	jobtest.RequireOneIDPerRevision(t, rec, events)
	require.Equal(t, []job.State{job.StateQueued, job.StateRunning, job.StateSucceeded}, jobtest.States(events))

	// A late copy of the work (a relay replaying the change log after the
	// de-duplication window) is dropped without a render.
	require.NoError(t, natsjs.PublishWork(context.Background(), b.conn.Res.JS, rec, 99))
	require.Eventually(t, func() bool { return jobtest.WorkMessages(t, b.conn.Res) == 0 }, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, b.rendersOf(rec.ID))
}

func TestRendererKilledOnTheLastAttemptLeavesAFailedJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fp, err := failpoint.Parse("renderer.mid-render=exit")
	require.NoError(t, err)
	died := make(chan struct{})
	var conn *jobtest.Conn
	fp.Exit = func(int) {
		conn.NC.Close()
		close(died)
		runtime.Goexit()
	}
	one := func(c *renderer.Config) { c.MaxAttempts = 1; c.Failpoints = fp; c.Concurrency = 1 }
	conn = b.renderer(t, "renderer-a", one)
	b.dispatcher(t, "dispatcher-a", func(c *dispatcher.Config) { c.MaxAttempts = 1 })
	rec := b.env.Admit(t, b.conn.Res, jobtest.Request{Key: "killed", Pages: 40})
	<-died

	// Nothing will ever touch this job again but the dispatcher: the
	// advisory of its exhausted work message, or the sweeper.
	done := jobtest.Terminal(t, b.conn.Res, rec.Key(), 30*time.Second)
	require.Equal(t, job.StateFailed, done.State)
	require.Equal(t, job.CategoryWorkerLost, done.Error.Category)
	require.Equal(t, 1, done.Attempt)
	require.NotNil(t, done.FinishedAt)
	require.Empty(t, jobtest.Objects(t, b.conn.Res))
}

func TestAFleetRendersEveryJobOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Failure detection with room for the race detector on two busy cores:
	// a renderer starved of CPU for a second must not look dead.
	patient := func(c *renderer.Config) {
		c.HeartbeatInterval = 500 * time.Millisecond
	}
	patientBroker := func(c *dispatcher.Config) {
		c.Broker = broker.Config{BeatInterval: 500 * time.Millisecond, StaleAfter: 2500 * time.Millisecond,
			RetryBase: time.Second}
	}
	b.renderer(t, "renderer-a", patient)
	b.renderer(t, "renderer-b", patient)
	b.dispatcher(t, "dispatcher-a", patientBroker)
	b.dispatcher(t, "dispatcher-b", patientBroker)
	recs := make([]*job.Record, 100)
	for i := range recs {
		req := jobtest.Request{Key: jobtest.ID("fleet", i), Pages: 1 + i%5}
		if i%2 == 0 {
			recs[i] = b.env.Admit(t, b.conn.Res, req)
		} else {
			recs[i] = b.env.Commit(t, b.conn.Res, req) // left to the relay
		}
	}
	for _, rec := range recs {
		done := jobtest.Terminal(t, b.conn.Res, rec.Key(), 120*time.Second)
		require.Equal(t, job.StateSucceeded, done.State)
		require.Equal(t, 1, b.rendersOf(rec.ID), "job %s renders %v, error of the last attempt %+v", rec.ID, b.rendersLog(rec.ID), done.Error)
	}
	require.Len(t, jobtest.Objects(t, b.conn.Res), 100)
	require.Eventually(t, func() bool { return jobtest.WorkMessages(t, b.conn.Res) == 0 }, 20*time.Second, 20*time.Millisecond)
}

package renderer

import (
	"context"
	"github.com/jobgate/jobgate/internal/broker"
	"github.com/jobgate/jobgate/test/brokertest"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// testBundle is what a renderer test works with: the embedded JetStream,
// the test's own connection to observe and act like the gateway, and a
// count of the renders every renderer of the test started.
type testBundle struct {
	env     *jobtest.Env
	conn    *jobtest.Conn
	renders *renderCount
	// brokerOnce starts jobgate's side of the worker protocol with the
	// first renderer.
	brokerOnce sync.Once
}

type renderCount struct {
	mu   sync.Mutex
	byID map[string][]int // job id → attempts rendered
}

func (c *renderCount) add(_ context.Context, r *job.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byID[r.ID] = append(c.byID[r.ID], r.Attempt)
}

func (c *renderCount) of(id string) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.byID[id]...)
}

func (c *renderCount) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, a := range c.byID {
		n += len(a)
	}
	return n
}

// brokerFor is jobgate's side of the worker protocol with timings that
// follow the test renderer's heartbeat: a claim silent for five beats is
// taken over, retries back off from ten.
func brokerFor(cfg Config) broker.Config {
	beat := cfg.HeartbeatInterval
	return broker.Config{BeatInterval: beat, StaleAfter: 5 * beat, RetryBase: 10 * beat,
		MaxAttempts: cfg.MaxAttempts}
}

// testConfig has budgets small enough for fast tests and slack enough for
// the race detector on two shared cores.
func testConfig() Config {
	return Config{
		Concurrency:       2,
		MaxAttempts:       3,
		RenderTimeout:     60 * time.Second,
		HeartbeatInterval: 500 * time.Millisecond,
		PullWait:          300 * time.Millisecond,
		DrainTimeout:      2 * time.Second,
	}
}

// setup starts an embedded JetStream and one renderer on its own
// connection; opts adjust the renderer's config.
func setup(t *testing.T, opts ...func(*Config)) (*Renderer, *testBundle) {
	t.Helper()
	env := jobtest.Start(t)
	b := &testBundle{env: env, conn: env.Connect(t, "test"), renders: &renderCount{byID: map[string][]int{}}}
	return b.start(t, "renderer-a", opts...), b
}

// start runs one more renderer of the test on a connection of its own.
func (b *testBundle) start(t *testing.T, name string, opts ...func(*Config)) *Renderer {
	t.Helper()
	r, _ := b.startOn(t, name, opts...)
	return r
}

func (b *testBundle) startOn(t *testing.T, name string, opts ...func(*Config)) (*Renderer, *jobtest.Conn) {
	t.Helper()
	conn := b.env.Connect(t, name)
	cfg := testConfig()
	cfg.Worker = name
	cfg.OnRender = b.renders.add
	for _, o := range opts {
		o(&cfg)
	}
	b.brokerOnce.Do(func() { brokertest.Start(t, b.env, brokerFor(cfg)) })
	r, err := New(cfg, worker.Config{Conn: conn.NC, Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background()))
	t.Cleanup(func() { _ = r.Stop(context.Background()) }) // a test that stops it checks how
	return r, conn
}

// admit submits a permit report the way the gateway does.
func (b *testBundle) admit(t *testing.T, key string, pages int) *job.Record {
	t.Helper()
	return b.env.Admit(t, b.conn.Res, jobtest.Request{Key: key, Pages: pages})
}

func (b *testBundle) terminal(t *testing.T, rec *job.Record, timeout time.Duration) *job.Record {
	t.Helper()
	return jobtest.Terminal(t, b.conn.Res, rec.Key(), timeout)
}

// cancel cancels a job the way the gateway's DELETE does.
func (b *testBundle) cancel(t *testing.T, rec *job.Record) *job.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := b.conn.Res.Jobs.Mutate(ctx, rec.Key(), func(r *job.Record) error {
		return r.Transition(job.StateCanceled, time.Now())
	})
	require.NoError(t, err)
	return out
}

// result reads the stored result object of a job.
func (b *testBundle) result(t *testing.T, rec *job.Record) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data, err := b.conn.Res.Results.GetBytes(ctx, rec.Output.Object)
	require.NoError(t, err)
	return data
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("JOBGATE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// slowStart makes every attempt spend 1.5s before it renders its first page
// (a slow render that looks at its context only between pages), so a 1s
// time budget runs out in every attempt.
func slowStart(c *Config) {
	prev := c.OnRender
	c.OnRender = func(ctx context.Context, r *job.Record) {
		if prev != nil {
			prev(ctx, r)
		}
		time.Sleep(1500 * time.Millisecond)
	}
}

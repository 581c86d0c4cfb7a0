package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/brokertest"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// testBundle is what a dispatcher test works with: the embedded JetStream
// and the test's own connection, with which it plays gateway and renderer.
type testBundle struct {
	env  *jobtest.Env
	conn *jobtest.Conn
}

// testConfig recovers silent jobs within a fraction of a second.
func testConfig() Config {
	return Config{
		MaxAttempts:      3,
		RenderTimeout:    200 * time.Millisecond,
		Grace:            100 * time.Millisecond,
		SweepInterval:    50 * time.Millisecond,
		QueuedCheckAfter: time.Hour,
	}
}

func setup(t *testing.T, opts ...func(*Config)) (*Dispatcher, *testBundle) {
	t.Helper()
	env := jobtest.Start(t)
	b := &testBundle{env: env, conn: env.Connect(t, "test")}
	return b.start(t, "dispatcher-a", opts...), b
}

// start runs one more dispatcher on a connection of its own.
func (b *testBundle) start(t *testing.T, name string, opts ...func(*Config)) *Dispatcher {
	t.Helper()
	cfg := testConfig()
	for _, o := range opts {
		o(&cfg)
	}
	d, err := New(cfg, storesOf(b.env.Connect(t, name).Res), testLogger().With("dispatcher", name))
	require.NoError(t, err)
	require.NoError(t, d.Start(context.Background()))
	t.Cleanup(func() { _ = d.Stop(context.Background()) })
	return d
}

// storesOf is system's DispatcherStores, which this package's
// tests cannot import (it imports the dispatcher).
func storesOf(res *natsjs.Resources) Stores {
	return Stores{Jobs: res.Jobs, Work: res.Work, Events: res.Events, Schedule: res.Schedule, Broker: brokertest.Stores(res)}
}

// put commits a job whose record edit has made what another component
// would have left behind.
func (b *testBundle) put(t *testing.T, key string, edit func(r *job.Record)) *job.Record {
	t.Helper()
	return b.env.CommitAs(t, b.conn.Res, jobtest.Request{Key: key, Pages: 5}, edit)
}

func (b *testBundle) mutate(t *testing.T, rec *job.Record, edit func(r *job.Record)) *job.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := b.conn.Res.Jobs.Mutate(ctx, rec.Key(), func(r *job.Record) error { edit(r); return nil })
	require.NoError(t, err)
	return out
}

// running makes r a running record of attempt n by worker, last heard of
// at heartbeat.
func running(n int, worker string, heartbeat time.Time) func(r *job.Record) {
	return func(r *job.Record) {
		hb := heartbeat.UTC()
		if r.State == job.StateQueued {
			if err := r.Transition(job.StateRunning, hb); err != nil {
				panic(fmt.Sprintf("fixture %s: %v", r.ID, err)) // a broken test, not a finding
			}
		}
		r.Attempt, r.Worker, r.HeartbeatAt = n, worker, &hb
		r.UpdatedAt = hb
	}
}

// workIDs lists the Nats-Msg-Ids of the work messages queued for rec.
func (b *testBundle) workIDs(t *testing.T, rec *job.Record) []string {
	t.Helper()
	return jobtest.WorkIDs(t, b.conn.Res, rec)
}

func testLogger() *slog.Logger {
	if os.Getenv("JOBGATE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

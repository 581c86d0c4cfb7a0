package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/jobtest"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/job"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// exhaustWork plays a renderer that takes the job's work message and never
// acknowledges it, on a consumer that allows one delivery: the message runs
// out of deliveries after ackWait.
func (b *testBundle) exhaustWork(t *testing.T, ackWait time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := natsjs.EnsureWorkConsumer(ctx, b.conn.Res.JS, natsjs.WorkConsumer{AckWait: ackWait, MaxDeliver: 1})
	require.NoError(t, err)
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	require.NoError(t, err)
	md, err := msg.Metadata()
	require.NoError(t, err)
	require.EqualValues(t, 1, md.NumDelivered)
}

// deadWork waits until the renderers consumer has given up on every
// delivered message.
func (b *testBundle) waitDeadWork(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, err := b.conn.Res.JS.Consumer(context.Background(), natsjs.StreamWork, natsjs.ConsumerRenderers)
		require.NoError(t, err)
		info, err := c.Info(context.Background())
		require.NoError(t, err)
		return info.NumAckPending == 0 && info.Delivered.Stream >= 1
	}, 10*time.Second, 20*time.Millisecond)
}

func TestMaxDeliveriesAdvisoryFailsAJobNoAttemptReached(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	rec := b.env.Admit(t, b.conn.Res, jobtest.Request{Key: "never-claimed"})
	b.exhaustWork(t, 300*time.Millisecond)

	done := jobtest.Terminal(t, b.conn.Res, rec.Key(), 10*time.Second)
	require.Equal(t, job.StateFailed, done.State)
	require.Equal(t, job.CategoryExhausted, done.Error.Category, "no attempt reached a verdict")
	require.Equal(t, 0, done.Attempt)
	require.NotNil(t, done.FinishedAt)
	require.Eventually(t, func() bool { return jobtest.WorkMessages(t, b.conn.Res) == 0 }, 10*time.Second, 20*time.Millisecond,
		"the dead work message is removed")
}

func TestMaxDeliveriesAdvisoryKeepsTheLastAttemptsCause(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.RenderTimeout = time.Hour })
	now := time.Now().UTC()
	rec := b.put(t, "between-attempts", func(r *job.Record) {
		running(1, "", now)(r)
		r.RetryAt = &now
		r.Error = &job.Failure{Category: job.CategoryRenderError, Message: "boom", Retryable: true}
	})
	require.NoError(t, natsjs.PublishWork(context.Background(), b.conn.Res.JS, rec, 0))
	b.exhaustWork(t, 300*time.Millisecond)

	done := jobtest.Terminal(t, b.conn.Res, rec.Key(), 10*time.Second)
	require.Equal(t, job.CategoryRenderError, done.Error.Category)
}

func TestMaxDeliveriesAdvisoryLeavesAJobWithALiveWorker(t *testing.T) {
	t.Parallel()
	d, b := setup(t, func(c *Config) { c.RenderTimeout = time.Hour; c.LiveHeartbeat = time.Hour })
	rec := b.put(t, "alive", running(1, "renderer-x", time.Now()))
	require.NoError(t, natsjs.PublishWork(context.Background(), b.conn.Res.JS, rec, 0))
	b.exhaustWork(t, 300*time.Millisecond)
	require.Eventually(t, func() bool { return jobtest.WorkMessages(t, b.conn.Res) == 0 }, 10*time.Second, 20*time.Millisecond)
	after, err := b.conn.Res.Jobs.Get(context.Background(), rec.Key())
	require.NoError(t, err)
	require.Equal(t, job.StateRunning, after.State)
	require.Equal(t, rec.Revision, after.Revision)
	_ = d
}

func TestMissedAdvisoryQueuedJobWithDeadWorkFailsOnTheSweep(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	b := &testBundle{env: env, conn: env.Connect(t, "test")}
	rec := env.Admit(t, b.conn.Res, jobtest.Request{Key: "advisory-missed"})
	b.exhaustWork(t, 200*time.Millisecond)
	b.waitDeadWork(t) // no dispatcher ran: the advisory went nowhere
	require.EqualValues(t, 1, jobtest.WorkMessages(t, b.conn.Res), "a message past MaxDeliver stays in the work queue")

	b.start(t, "dispatcher-a", func(c *Config) { c.QueuedCheckAfter = 100 * time.Millisecond })
	done := jobtest.Terminal(t, b.conn.Res, rec.Key(), 10*time.Second)
	require.Equal(t, job.CategoryExhausted, done.Error.Category)
	require.Eventually(t, func() bool { return jobtest.WorkMessages(t, b.conn.Res) == 0 }, 10*time.Second, 20*time.Millisecond)
}

func TestQueuedJobWhoseWorkVanishedIsPublishedAgain(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	b := &testBundle{env: env, conn: env.Connect(t, "test")}
	rec := env.Admit(t, b.conn.Res, jobtest.Request{Key: "work-lost"})
	s, err := b.conn.Res.JS.Stream(context.Background(), natsjs.StreamWork)
	require.NoError(t, err)
	require.NoError(t, s.Purge(context.Background()))

	// The relay's generation-0 copy is swallowed by de-duplication (the
	// lost message was published moments ago); the sweeper publishes a
	// new generation.
	b.start(t, "dispatcher-a", func(c *Config) { c.QueuedCheckAfter = 200 * time.Millisecond })
	require.Eventually(t, func() bool { return len(b.workIDs(t, rec)) == 1 }, 10*time.Second, 20*time.Millisecond)
	after, err := b.conn.Res.Jobs.Get(context.Background(), rec.Key())
	require.NoError(t, err)
	require.Equal(t, job.StateQueued, after.State)
	require.NotEqual(t, rec.ID, b.workIDs(t, rec)[0])
}

package dispatcher

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// lostAnswer is the record store whose first relay consumer create is
// never answered, as a create whose answer was lost with a leader change.
type lostAnswer struct {
	records
	calls atomic.Int32
}

func (s *lostAnswer) ConsumeChanges(ctx context.Context, batch int) (*natsjs.ChangeLog, error) {
	if s.calls.Add(1) == 1 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.records.ConsumeChanges(ctx, batch)
}

// A start step whose JetStream call goes unanswered is tried again within
// the start bound, and the dispatcher starts and relays (chaos seed
// 20261205: it exited after 30 s around two paused NATS nodes).
func TestStartOutlastsAnUnansweredConsumerCreate(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	conn := env.Connect(t, "test")
	d, err := New(testConfig(), storesOf(env.Connect(t, "dispatcher").Res), testLogger())
	require.NoError(t, err)
	store := &lostAnswer{records: d.jobs}
	d.jobs, d.startTry = store, 300*time.Millisecond
	require.NoError(t, d.Start(context.Background()))
	t.Cleanup(func() { _ = d.Stop(context.Background()) })
	require.GreaterOrEqual(t, store.calls.Load(), int32(2), "the unanswered create was made again")

	rec := env.Commit(t, conn.Res, jobtest.Request{Key: "after-a-lost-answer"})
	require.Eventually(t, func() bool { return len(jobtest.Events(t, conn.Res, rec)) == 1 }, 10*time.Second, 20*time.Millisecond,
		"the relay announces the admission")
}

package dispatcher

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

func TestStopLeavesNoGoroutineBehind(t *testing.T) {
	// Not parallel: it counts the package's goroutines.
	d, b := setup(t)
	rec := b.env.Commit(t, b.conn.Res, jobtest.Request{Key: "before-stop"})
	require.Eventually(t, func() bool { return len(b.workIDs(t, rec)) == 1 }, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, d.Stop(context.Background()))
	require.NoError(t, d.Stop(context.Background()), "a second Stop is a no-op")
	require.Eventually(t, func() bool { return strings.Count(goroutineDump(), "jobgate/dispatcher.(*") == 0 },
		5*time.Second, 20*time.Millisecond, "goroutines left:\n%s", goroutineDump())
}

func goroutineDump() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// stuckEvents is an event stream whose publishes wait for their context
// to end: a change the relay cannot finish relaying.
type stuckEvents struct {
	eventPublisher
	once    sync.Once
	entered chan struct{}
}

func (s *stuckEvents) PublishFirst(ctx context.Context, _ *job.Record) (uint64, bool, error) {
	s.once.Do(func() { close(s.entered) })
	<-ctx.Done()
	return 0, false, ctx.Err()
}

// A change in hand that outlasts Stop's deadline does not hold Stop: it
// cancels the relay's operation and returns, in time, an error that says
// the deadline passed. Stop before Start and a second Stop return nil.
func TestStopReturnsAtItsDeadline(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	conn := env.Connect(t, "test")
	d, err := New(testConfig(), storesOf(env.Connect(t, "dispatcher").Res), testLogger())
	require.NoError(t, err)
	events := &stuckEvents{eventPublisher: d.events, entered: make(chan struct{})}
	d.events = events
	require.NoError(t, d.Start(context.Background()))
	env.Commit(t, conn.Res, jobtest.Request{Key: "relayed-while-stopping"})
	select {
	case <-events.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay never took the change")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	err = d.Stop(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(began), 3*time.Second, "Stop outlived its deadline")

	unstarted, err := New(testConfig(), storesOf(conn.Res), testLogger())
	require.NoError(t, err)
	require.NoError(t, unstarted.Stop(context.Background()))
	require.NoError(t, unstarted.Stop(context.Background()))
	require.Error(t, unstarted.Start(context.Background()), "a stopped dispatcher does not start")
}

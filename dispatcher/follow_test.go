package dispatcher

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// A change whose handling stalls (a store round trip that hangs) holds up
// only the changes of its own key: other jobs' changes are handled
// meanwhile, and one job's changes are still handled one at a time in log
// order.
func TestFollowLanesKeepOrderPerKeyOnly(t *testing.T) {
	t.Parallel()
	env := &testBundle{env: jobtest.Start(t)}
	env.conn = env.env.Connect(t, "test")
	conn := env.conn
	d, err := New(testConfig(), storesOf(conn.Res), testLogger())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	slow := env.put(t, "follow-slow", nil)
	// Several other jobs: the lanes are chosen by a hash with a random
	// seed, and one other job would share the stalled job's lane once in
	// 16 runs; eight all do once in 16^8.
	others := map[string]bool{}
	for i := range 8 {
		others[env.put(t, fmt.Sprintf("follow-other-%d", i), nil).ID] = true
	}
	ordered := env.put(t, "follow-ordered", nil)
	for range 3 {
		ordered = env.mutate(t, ordered, func(r *job.Record) { r.UpdatedAt = r.UpdatedAt.Add(time.Second) })
	}

	changes, err := conn.Res.Jobs.ConsumeChanges(ctx, 100)
	require.NoError(t, err)
	release := make(chan struct{})
	var mu sync.Mutex
	handled := map[string][]uint64{}
	otherDone := make(chan struct{})
	var once sync.Once
	d.follow(ctx, "test", changes, natsjs.JobChangeKey, func(_ context.Context, c *natsjs.LoggedChange) {
		rec, err := c.Record()
		if err != nil {
			_ = c.Term("bad")
			return
		}
		if rec.ID == slow.ID {
			<-release
		}
		mu.Lock()
		handled[rec.ID] = append(handled[rec.ID], rec.Revision)
		mu.Unlock()
		if others[rec.ID] {
			once.Do(func() { close(otherDone) })
		}
		_ = c.Ack()
	})
	select {
	case <-otherDone:
	case <-ctx.Done():
		close(release)
		t.Fatal("every other job's change waited behind a stalled one")
	}
	close(release)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled[slow.ID]) == 1 && len(handled[ordered.ID]) >= 1 &&
			handled[ordered.ID][len(handled[ordered.ID])-1] == ordered.Revision
	}, 10*time.Second, 10*time.Millisecond)
	changes.Stop()
	d.wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	revs := handled[ordered.ID]
	for i := 1; i < len(revs); i++ {
		require.Less(t, revs[i-1], revs[i], "one job's changes out of log order: %v", revs)
	}
}

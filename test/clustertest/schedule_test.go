package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobgate/jobgate/dispatcher"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/system"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Scheduled jobs survive the loss of the node that leads the scheduled set
// on a 3-node cluster (entries of 3 replicas, read from the leader), with
// two dispatchers on the other nodes: every job is queued, none before its
// run_at, and each once.
func TestScheduledJobsSurviveALeaderLoss(t *testing.T) {
	c := Start(t, 3)
	layout := natsjs.DefaultLayout()
	layout.Replicas = 3
	_, svc := c.Provision("service", c.URLs(), layout)
	victim := c.Leader(svc.JS, natsjs.StreamSchedule)
	for i, node := range []int{(victim + 1) % 3, (victim + 2) % 3} {
		name := fmt.Sprintf("dispatcher-%d", i+1)
		_, res := c.Provision(name, c.Node(node).URL(), layout)
		disp, err := dispatcher.New(dispatcher.Config{}, system.DispatcherStores(res), testLogger(t).With("component", name))
		require.NoError(t, err)
		require.NoError(t, disp.Start(context.Background()))
		t.Cleanup(func() { _ = disp.Stop(context.Background()) })
	}
	env := &jobtest.Env{Secret: []byte("clustertest-schedule")}
	first := time.Now().Add(8 * time.Second)
	var recs []*job.Record
	for i := range 12 {
		at := first.Add(time.Duration(i) * 250 * time.Millisecond).UTC()
		recs = append(recs, env.CommitAs(t, svc, jobtest.Request{Key: fmt.Sprintf("sched-%d", i), Pages: 1}, func(r *job.Record) {
			r.State, r.RunAt = job.StateScheduled, &at
		}))
	}
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n, err := svc.Schedule.Depth(ctx)
		return err == nil && n == uint64(len(recs))
	}, 30*time.Second, 50*time.Millisecond, "the relay stored every entry")
	require.True(t, time.Now().Before(first), "the entries were stored before the first run_at")

	c.Stop(victim)
	t.Cleanup(func() { c.Restart(victim) })
	for _, r := range recs {
		got := jobtest.WaitFor(t, svc, r.Key(), time.Minute, func(x *job.Record) bool { return x.State != job.StateScheduled })
		require.Equal(t, job.StateQueued, got.State, r.ID)
		require.False(t, got.UpdatedAt.Before(*r.RunAt), "%s queued %s before its run_at", r.ID, r.RunAt.Sub(got.UpdatedAt))
		require.Less(t, got.UpdatedAt.Sub(*r.RunAt), 20*time.Second, "%s queued late, past a leader election", r.ID)
		// The events are published after the record's change (by the waker,
		// or by a relay after a node's loss): wait for them, then hold
		// that there is exactly one per change.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, []job.State{job.StateScheduled, job.StateQueued}, jobtest.States(jobtest.Events(t, svc, got)), "%s: one event per change", r.ID)
		}, 30*time.Second, 100*time.Millisecond)
	}
}

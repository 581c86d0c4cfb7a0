package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/stretchr/testify/require"
)

// Submit's flow options reach the job: a delayed job is scheduled with its
// run_at and priority, the same submission again replays it (the delay
// resolved once), another under the key is a conflict, and the deployment's
// dispatcher queues it at its run_at.
func TestSubmitWithFlowOptions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newClient(t, b.URL, b.Token)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := map[string]any{"case_id": 47, "revision": 29}
	startBy := time.Now().Add(time.Hour)
	sub, err := c.Submit(ctx, "permit_report", params, client.WithKey("flow-1"),
		client.WithDelay(1500*time.Millisecond), client.WithPriority(2), client.WithStartBy(startBy))
	require.NoError(t, err)
	require.Equal(t, api.StateScheduled, sub.Job.State)
	require.NotNil(t, sub.Job.RunAt)
	require.Equal(t, 2, sub.Job.Priority)
	require.Equal(t, startBy.UTC().Truncate(time.Microsecond), sub.Job.StartBy.UTC().Truncate(time.Microsecond))

	again, err := c.Submit(ctx, "permit_report", params, client.WithKey("flow-1"),
		client.WithDelay(1500*time.Millisecond), client.WithPriority(2), client.WithStartBy(startBy))
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, sub.Job.RunAt.UTC(), again.Job.RunAt.UTC())

	_, err = c.Submit(ctx, "permit_report", params, client.WithKey("flow-1"), client.WithDelay(time.Hour))
	var conflict *client.ConflictError
	require.True(t, errors.As(err, &conflict), "%v", err)

	for {
		res, err := c.Get(ctx, sub.Job.ID)
		require.NoError(t, err)
		if res.State != api.StateScheduled {
			require.Equal(t, api.StateQueued, res.State)
			require.False(t, time.Now().Before(*res.RunAt), "queued before its run_at")
			break
		}
		require.NoError(t, ctx.Err(), "never queued")
		time.Sleep(50 * time.Millisecond)
	}
}

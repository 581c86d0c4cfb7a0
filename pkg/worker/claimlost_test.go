package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/jobtest"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/job"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/stretchr/testify/require"
)

// A claim whose write was stored but whose answer was lost (the record
// leader's node stopped right after; clustertest TestNodeLossUnderLoad,
// 06:19 UTC 2026-12-01): the claiming worker took it for an outage and gave
// the message back, and its redelivery finds the job "running" on a worker
// that does not run it. The job must run soon (at the latest once that
// claim is stale), not wait for the dispatcher's limit (the attempt budget
// plus grace), which is what happens when the redelivery is acknowledged.
func TestClaimStoredButUnansweredStillRuns(t *testing.T) {
	for _, tc := range []struct{ name, claimedBy string }{
		{"redelivered to the claimer", "w-claim"},
		{"redelivered to another worker", "w-gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := jobtest.Start(t)
			admin := env.Connect(t, "admin")
			rec := env.CommitAs(t, admin.Res, jobtest.Request{Key: "claim-unanswered"}, func(r *job.Record) {
				require.NoError(t, r.Claim(tc.claimedBy, time.Now()))
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, natsjs.PublishWork(ctx, admin.Res.JS, rec, 0))

			r := newRuns()
			startWorkers(t, env, "w-claim", 1, func(c *worker.Config) {
				c.AckWait, c.HeartbeatInterval, c.StaleAfter = 20*time.Second, time.Second, 3*time.Second
			}, func(ctx context.Context, j *worker.Job[permitParams]) error {
				r.begin(j.Tenant, j.ID)
				defer r.end(j.Tenant)
				_, err := j.Output().Write([]byte("%PDF " + j.ID))
				return err
			})
			done := jobtest.Terminal(t, admin.Res, rec.Key(), 15*time.Second)
			require.Equal(t, job.StateSucceeded, done.State, "last error %+v", done.Error)
			require.Equal(t, 1, r.of(done.ID))
		})
	}
}

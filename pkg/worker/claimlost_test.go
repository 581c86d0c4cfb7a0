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

// An attempt its worker gives back without a verdict (here: the process
// stops and its drain time runs out) uses up none of the job's attempts: a
// job of a type with one attempt still runs on the next worker, as attempt
// 2, instead of failing exhausted. Outages delay jobs, they never fail them.
func TestAGivenBackAttemptUsesUpNoneOfTheJobsAttempts(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	admin := env.Connect(t, "admin")
	started := make(chan struct{}, 1)
	register := func(name string, block bool) *worker.Workers {
		conn := env.Connect(t, name)
		w, err := worker.New(worker.Config{Conn: conn.NC, Name: name, AckWait: 5 * time.Second, HeartbeatInterval: 200 * time.Millisecond,
			StaleAfter: time.Second, PullWait: 300 * time.Millisecond, DrainTimeout: 100 * time.Millisecond})
		require.NoError(t, err)
		require.NoError(t, worker.Register(w, worker.Type[permitParams]{
			Name: "permit_report", Schema: permitSchema, Concurrency: 1, Attempts: 1, Timeout: time.Minute,
			Work: func(ctx context.Context, j *worker.Job[permitParams]) error {
				if block {
					started <- struct{}{}
					<-ctx.Done()
					return ctx.Err()
				}
				_, err := j.Output().Write([]byte("%PDF " + j.ID))
				return err
			},
		}))
		require.NoError(t, w.Start(context.Background()))
		t.Cleanup(w.Stop)
		return w
	}
	first := register("w-stopping", true)
	rec := env.Admit(t, admin.Res, jobtest.Request{Key: "given-back-once"})
	select {
	case <-started:
	case <-time.After(15 * time.Second):
		t.Fatal("the job never started")
	}
	first.Stop()
	given := jobtest.WaitFor(t, admin.Res, rec.Key(), 10*time.Second, func(r *job.Record) bool { return r.Worker == "" })
	require.Equal(t, 1, given.Attempt)
	require.Equal(t, 1, given.GivenBack)

	register("w-next", false)
	done := jobtest.Terminal(t, admin.Res, rec.Key(), 15*time.Second)
	require.Equal(t, job.StateSucceeded, done.State, "error %+v", done.Error)
	require.Equal(t, 2, done.Attempt, "attempt numbers only grow")
}

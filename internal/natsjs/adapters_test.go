package natsjs_test

import (
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// The adapters answer with the domain's errors, whatever JetStream said.
func TestAdaptersMapErrors(t *testing.T) {
	t.Parallel()
	res, err := provision(setupProvision(t), natsjs.DefaultLayout())
	require.NoError(t, err)
	ctx := storeCtx(t)

	n := res.Notices
	_, _, err = n.Get(ctx, "mail.4.r.job_x.succeeded")
	require.ErrorIs(t, err, job.ErrNotFound)
	rev, err := n.Create(ctx, "mail.4.r.job_x.succeeded", []byte("claim"))
	require.NoError(t, err)
	_, err = n.Create(ctx, "mail.4.r.job_x.succeeded", []byte("again"))
	require.ErrorIs(t, err, natsjs.ErrExists)
	next, err := n.Update(ctx, "mail.4.r.job_x.succeeded", []byte("sent"), rev)
	require.NoError(t, err)
	_, err = n.Update(ctx, "mail.4.r.job_x.succeeded", []byte("stale"), rev)
	require.ErrorIs(t, err, natsjs.ErrStale)
	require.ErrorIs(t, n.Delete(ctx, "mail.4.r.job_x.succeeded", rev), natsjs.ErrStale)
	v, got, err := n.Get(ctx, "mail.4.r.job_x.succeeded")
	require.NoError(t, err)
	require.Equal(t, "sent", string(v))
	require.Equal(t, next, got)
	require.NoError(t, n.Delete(ctx, "mail.4.r.job_x.succeeded", next))
	_, _, err = n.Get(ctx, "mail.4.r.job_x.succeeded")
	require.ErrorIs(t, err, job.ErrNotFound, "a deleted key reads as missing")

	_, err = res.Files.Open(ctx, "job_gone.pdf")
	require.ErrorIs(t, err, job.ErrResultExpired)

	r := newRecord("4", "reviewer-47", "job_work")
	require.NoError(t, res.Work.Publish(ctx, r, 0))
	require.NoError(t, res.Work.Publish(ctx, r, 0), "a duplicate publish is absorbed")
	ws, err := res.Work.Pending(ctx, r)
	require.NoError(t, err)
	require.NotZero(t, ws.Seq)
	require.False(t, ws.Delivered, "no worker ran")
	other := newRecord("4", "reviewer-47", "job_never_published")
	ws, err = res.Work.Pending(ctx, other)
	require.NoError(t, err)
	require.Zero(t, ws.Seq, "the queue holds no work of the job")
	require.NoError(t, res.Jobs.Ping(ctx))
}

// The sweeper learns whether a job's work was delivered from the consumer
// that holds it (those of earlier versions: a requester's, or a capped
// tenant's).
func TestPendingWorkAsksTheConsumerThatHoldsIt(t *testing.T) {
	t.Parallel()
	js := setupProvision(t)
	res, err := provision(js, natsjs.DefaultLayout())
	require.NoError(t, err)
	ctx := storeCtx(t)
	for _, r := range []*job.Record{newRecord("open", "r1", "job_open"), newRecord("capped", "r1", "job_capped")} {
		require.NoError(t, res.Work.Publish(ctx, r, 0))
		cc := jetstream.ConsumerConfig{Durable: natsjs.RequesterWorkConsumerName("permit_report", r.Tenant, r.Requester),
			FilterSubject: natsjs.RequesterWork("permit_report", r.Tenant, r.Requester), AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: time.Minute, MaxDeliver: -1}
		if r.Tenant == "capped" {
			cc.Durable, cc.FilterSubject = natsjs.TenantWorkConsumerName("permit_report", r.Tenant), natsjs.TenantWork("permit_report", r.Tenant)
		}
		c, err := js.CreateOrUpdateConsumer(ctx, natsjs.StreamWork, cc)
		require.NoError(t, err)
		ws, err := res.Work.Pending(ctx, r)
		require.NoError(t, err)
		require.False(t, ws.Delivered, r.Tenant)
		_, err = c.Next(jetstream.FetchMaxWait(5 * time.Second))
		require.NoError(t, err)
		ws, err = res.Work.Pending(ctx, r)
		require.NoError(t, err)
		require.NotZero(t, ws.Seq)
		require.True(t, ws.Delivered, r.Tenant)
	}
}

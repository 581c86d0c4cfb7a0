package notifier

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// eventOf is the event the relay publishes for r, as the notifier reads it.
func eventOf(r *job.Record) *event {
	return &event{ID: natsjs.EventMsgID(r), Tenant: r.Tenant, Requester: r.Requester, Job: r.Resource("", r.UpdatedAt)}
}

// readmitted is r as admitted again under the same key after its record
// expired: the same job id (ids derive from the key), a later created_at.
func readmitted(r *job.Record, later time.Duration) *job.Record {
	c := *r
	c.CreatedAt = r.CreatedAt.Add(later)
	c.UpdatedAt = r.UpdatedAt.Add(later)
	if r.StartedAt != nil {
		s := r.StartedAt.Add(later)
		c.StartedAt = &s
	}
	if r.FinishedAt != nil {
		f := r.FinishedAt.Add(later)
		c.FinishedAt = &f
	}
	return &c
}

// The notices of a job that was admitted again after its record expired are
// a new scope: old delivery states and mail claims, still alive in
// JOBGATE_NOTICES, do not swallow the new job's webhook or mail.
func TestReadmittedJobIsNotifiedAgain(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, statuses(http.StatusNoContent))
	sink := jobtest.NewSMTPSink(t)
	cfg := smtpConfig(sink, "readmit")
	cfg.Webhooks = map[string][]Webhook{"4": {{URL: rcv.srv.URL, Secret: testSecret}}}
	cfg.AllowPrivate = true
	n, b := setup(t, cfg)

	first := record("4", "reviewer-47", "job_readmitted", job.StateSucceeded)
	b.publish(t, first)
	require.Eventually(t, func() bool { return n.Stats().Settled == 2 }, waitTimeout, 10*time.Millisecond)
	require.Equal(t, 1, rcv.count())
	require.Equal(t, 1, mailsByJob(t, sink)["job_readmitted"])

	// The second job's event reaches the notifier with the same message id
	// (<job_id>.<state>.<attempt>); the stream's duplicate window has long
	// passed in real life, so here it is handed to the notifier directly.
	second := readmitted(first, 31*24*time.Hour)
	ev := eventOf(second)
	body, err := ev.webhookBody()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.True(t, n.runWebhook(ctx, n.endpoints["4"][0], ev, body).done)
	require.Equal(t, 2, rcv.count(), "the new job's webhook is delivered")
	require.True(t, n.runMail(ctx, ev, "reviewer47@example.test").done)
	require.Equal(t, 2, mailsByJob(t, sink)["job_readmitted"], "the new job's mail is sent")

	// And each job still gets its notices once.
	require.True(t, n.runWebhook(ctx, n.endpoints["4"][0], ev, body).done)
	require.True(t, n.runMail(ctx, ev, "reviewer47@example.test").done)
	require.Equal(t, 2, rcv.count())
	require.Equal(t, 2, mailsByJob(t, sink)["job_readmitted"])
}

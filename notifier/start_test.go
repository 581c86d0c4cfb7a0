package notifier

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// lostEventsAnswer is the event source whose first consumer create is
// never answered, as a create whose answer was lost with a leader change.
type lostEventsAnswer struct {
	eventSource
	calls atomic.Int32
}

func (s *lostEventsAnswer) ConsumeEvents(ctx context.Context, c natsjs.NotifierConsumer) (*natsjs.EventFeed, error) {
	if s.calls.Add(1) == 1 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.eventSource.ConsumeEvents(ctx, c)
}

// A consumer create that goes unanswered is tried again within the start
// bound: the notifier starts and delivers, instead of its process exiting
// (the dispatcher's exit in chaos seed 20261205 had the same cause).
func TestStartOutlastsAnUnansweredConsumerCreate(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, statuses(http.StatusNoContent))
	env := jobtest.Start(t)
	b := &testBundle{emb: env.Emb, res: env.Connect(t, "notifier-test").Res}
	n := b.build(t, Config{Webhooks: map[string][]Webhook{"4": {{URL: rcv.srv.URL, Secret: testSecret}}}, AllowPrivate: true})
	src := &lostEventsAnswer{eventSource: n.events}
	n.events, n.startTry = src, 300*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, n.Start(ctx))
	require.GreaterOrEqual(t, src.calls.Load(), int32(2), "the unanswered create was made again")

	b.publish(t, record("4", "reviewer-47", "job_after_lost_answer", job.StateSucceeded))
	require.Eventually(t, func() bool { return rcv.count() == 1 }, waitTimeout, 10*time.Millisecond)
}

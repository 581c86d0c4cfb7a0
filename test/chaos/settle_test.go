package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// A run is not settled while a dispatcher's relay still holds a record
// change: the terminal event of a batch item whose writer died between the
// record's write and the event is on its way (the relay stores it), while
// the batch's notice, made from the records, was delivered already. The
// final state read then would count that event as never published
// (terminal-event-missing, seed 20260101 in CI).
func TestARunIsNotSettledWhileARelayHoldsAChange(t *testing.T) {
	t.Parallel()
	env := jobtest.Start(t)
	conn := env.Connect(t, "test")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A batch item worked to its end by a broker killed before it stored
	// the event of its success.
	rec := env.Commit(t, conn.Res, jobtest.Request{Key: "item-1", Pages: 5})
	now := time.Now()
	done, err := conn.Res.Jobs.Mutate(ctx, rec.Key(), func(r *job.Record) error {
		if err := r.Claim("renderer-1", now); err != nil {
			return err
		}
		return r.Succeed(nil, now)
	})
	require.NoError(t, err)
	// A relay took the change and holds it (its grace, or its dispatcher
	// died or was cut off holding it: it comes back after the ack wait).
	changes, err := conn.Res.Jobs.ConsumeChanges(ctx, 10)
	require.NoError(t, err)
	defer changes.Stop()
	held, err := changes.Next()
	require.NoError(t, err)
	got, err := held.Record()
	require.NoError(t, err)
	require.Equal(t, done.Revision, got.Revision)
	require.Empty(t, jobtest.Events(t, conn.Res, done), "no event stored yet")

	// Another item's event made the batch's notice: delivered.
	r := &run{o: &Options{}, hook: &webhookSink{ok: map[string]map[string]bool{}},
		jobs:    map[string]string{done.ID: done.Requester},
		batches: map[string]*admittedBatch{"batch_1": {requester: done.Requester, notify: "batch", jobs: []string{done.ID}}}}
	r.hook.accepted("batch_1", batchCompleted)

	wait, stop := context.WithTimeout(ctx, 2500*time.Millisecond)
	n, pending, inHand := r.waitSettled(wait, conn.NC)
	stop()
	require.Equal(t, 1, n)
	require.Zero(t, pending, "the job is terminal and its batch's notice delivered")
	require.EqualValues(t, 1, inHand, "not settled: the relay still holds the terminal change")

	// The relay is done with it (it stored the event): settled.
	require.NoError(t, held.Ack())
	n, pending, inHand = r.waitSettled(ctx, conn.NC)
	require.Equal(t, 1, n)
	require.Zero(t, pending)
	require.Zero(t, inHand)
	require.NoError(t, ctx.Err())
}

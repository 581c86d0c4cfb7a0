package dispatcher

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// A job worked through this dispatcher's broker costs the relay no read of
// the event stream and no second delivery of its terminal change: the
// broker tells the relay which changes it announced, and a terminal change
// waits out its grace in memory. The job still has its three events, in
// order.
func TestTheRelayTakesTheBrokersWordForTheEventsItStored(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.RenderTimeout = time.Hour })
	reads := b.env.CountEventReads(t)

	conn := b.env.Connect(t, "worker")
	w, err := worker.New(worker.Config{Conn: conn.NC, Name: "w", Credential: wire.JobgateCredential, PullWait: time.Second, NewcomerSlots: -1})
	require.NoError(t, err)
	type params struct {
		CaseID   int `json:"case_id"`
		Revision int `json:"revision"`
		Pages    int `json:"pages"`
	}
	require.NoError(t, worker.Register(w, worker.Type[params]{Name: "permit_report", Concurrency: 1,
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["case_id","revision"],` +
			`"properties":{"case_id":{"type":"integer","minimum":1},"revision":{"type":"integer","minimum":1},` +
			`"pages":{"type":"integer","minimum":1,"maximum":2000,"default":10}}}`),
		Work: func(_ context.Context, j *worker.Job[params]) error {
			_, err := j.Output().Write([]byte("%PDF-1.4 announced"))
			return err
		}}))
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })

	rec := b.env.Commit(t, b.conn.Res, jobtest.Request{Key: "announced", Pages: 1})
	done := jobtest.Terminal(t, b.conn.Res, rec.Key(), 20*time.Second)
	require.Equal(t, job.StateSucceeded, done.State)

	// Every change relayed, the terminal one included (its grace is 2s).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cons, err := b.conn.Res.JS.Consumer(ctx, "KV_"+natsjs.BucketJobs, natsjs.ConsumerRelay)
	require.NoError(t, err)
	for {
		info, err := cons.Info(ctx)
		require.NoError(t, err)
		if info.NumPending == 0 && info.NumAckPending == 0 {
			require.Zero(t, info.NumRedelivered, "no change was delivered twice")
			break
		}
		require.NoError(t, ctx.Err(), "the relay did not acknowledge every change")
		time.Sleep(20 * time.Millisecond)
	}
	require.Zero(t, reads.Load(), "no read of the event stream")
	var states []job.State
	for _, e := range jobtest.Events(t, b.conn.Res, rec) {
		states = append(states, e.Resource.State)
	}
	require.Equal(t, []job.State{job.StateQueued, job.StateRunning, job.StateSucceeded}, states)
}

package broker_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/broker"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/test/brokertest"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// A pkg/worker attempt whose beats no broker answers stops its handler once
// the lease of its last beat answered ok runs out, and reports no verdict:
// by then jobgate may have taken the claim over (or given its concurrency
// place to another job), so running on would run two attempts at once.
// It gives the job back once its handler returned (refused if the claim
// was taken over), and the job runs again.
func TestAWorkerStopsItsHandlerWhenItsLeaseRunsOut(t *testing.T) {
	t.Parallel()
	tenv := jobtest.Start(t)
	const stale = time.Second
	b := brokertest.Start(t, tenv, broker.Config{BeatInterval: 200 * time.Millisecond, StaleAfter: stale})
	conn := tenv.Connect(t, "worker")
	tenv.Admit(t, conn.Res, jobtest.Request{Tenant: "4", Requester: "r", Key: "lease-1", Pages: 1})

	var verdicts, givenBack atomic.Int64
	watch := tenv.Connect(t, "watch")
	for _, op := range []string{wire.OpDone, wire.OpFail, wire.OpGiveBack} {
		sub, err := watch.NC.Subscribe(wire.Subject(wire.JobgateCredential, "permit_report", op), func(m *nats.Msg) {
			var req wire.GiveBackRequest
			if op == wire.OpGiveBack && json.Unmarshal(m.Data, &req) == nil && req.Reason == "lease_lapsed" {
				givenBack.Add(1)
				return
			}
			verdicts.Add(1)
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	require.NoError(t, watch.NC.Flush())

	started := make(chan struct{}, 2)
	var stoppedAt, runs atomic.Int64
	var succeeded atomic.Int64
	w, err := worker.New(worker.Config{Conn: conn.NC, Name: "lease", Credential: wire.JobgateCredential, NewcomerSlots: -1,
		OnAttempt: func(_, outcome string, _ time.Duration) {
			if outcome == "succeeded" {
				succeeded.Add(1)
			}
		}})
	require.NoError(t, err)
	require.NoError(t, worker.Register(w, worker.Type[permitParams]{Name: "permit_report", Schema: permitSchema, Concurrency: 1,
		Work: func(ctx context.Context, _ *worker.Job[permitParams]) error {
			started <- struct{}{}
			if runs.Add(1) > 1 {
				return nil // the run after the broker came back
			}
			<-ctx.Done() // the type's timeout is a minute away
			stoppedAt.CompareAndSwap(0, time.Now().UnixNano())
			return ctx.Err()
		}}))
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, w.Stop(context.Background())) })

	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not start")
	}
	time.Sleep(600 * time.Millisecond) // some beats answered ok
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cut := time.Now()
	require.NoError(t, b.Stop(ctx)) // from here no beat is answered
	deadline := time.Now().Add(10 * time.Second)
	for stoppedAt.Load() == 0 {
		require.True(t, time.Now().Before(deadline), "the handler still runs with no beat answered")
		time.Sleep(20 * time.Millisecond)
	}
	ran := time.Unix(0, stoppedAt.Load()).Sub(cut)
	t.Logf("handler stopped %s after the broker", ran)
	require.Less(t, ran, stale+500*time.Millisecond, "stopped within the lease of the last beat answered")
	deadline = time.Now().Add(10 * time.Second)
	for givenBack.Load() == 0 {
		require.True(t, time.Now().Before(deadline), "the lapsed attempt is given back once its handler returned")
		time.Sleep(20 * time.Millisecond)
	}
	require.Zero(t, verdicts.Load(), "no verdict of the lapsed attempt")
	// With a broker again, the job runs again.
	brokertest.Start(t, tenv, broker.Config{BeatInterval: 200 * time.Millisecond, StaleAfter: stale})
	deadline = time.Now().Add(30 * time.Second)
	for succeeded.Load() == 0 {
		require.True(t, time.Now().Before(deadline), "the job ran again and succeeded")
		time.Sleep(20 * time.Millisecond)
	}
}

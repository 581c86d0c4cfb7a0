package broker_test

import (
	"context"
	"strconv"
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

// A pkg/worker slot with a backlog asks for its next job with each
// success: five ready jobs on one slot cost one next request, not five.
func TestAWorkerSlotTakesItsNextJobWithEachSuccess(t *testing.T) {
	t.Parallel()
	tenv := jobtest.Start(t)
	brokertest.Start(t, tenv, broker.Config{})
	conn := tenv.Connect(t, "worker")
	const n = 5
	for i := range n {
		tenv.Admit(t, conn.Res, jobtest.Request{Tenant: "4", Requester: "r", Key: "chain-" + strconv.Itoa(i), Pages: 1})
	}
	var nexts atomic.Int64
	watch := tenv.Connect(t, "watch")
	sub, err := watch.NC.Subscribe(wire.Subject(wire.JobgateCredential, "permit_report", wire.OpNext), func(*nats.Msg) { nexts.Add(1) })
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, watch.NC.Flush())

	var succeeded atomic.Int64
	var atDone atomic.Int64
	w, err := worker.New(worker.Config{Conn: conn.NC, Name: "chain", Credential: wire.JobgateCredential, PullWait: 2 * time.Second,
		NewcomerSlots: -1,
		OnAttempt: func(_, outcome string, _ time.Duration) {
			if outcome == "succeeded" && succeeded.Add(1) == n {
				atDone.Store(nexts.Load())
			}
		}})
	require.NoError(t, err)
	require.NoError(t, worker.Register(w, worker.Type[permitParams]{Name: "permit_report", Schema: permitSchema, Concurrency: 1,
		Work: func(context.Context, *worker.Job[permitParams]) error { return nil }}))
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, w.Stop(context.Background())) })
	deadline := time.Now().Add(20 * time.Second)
	for succeeded.Load() < n {
		require.True(t, time.Now().Before(deadline), "%d of %d succeeded", succeeded.Load(), n)
		time.Sleep(20 * time.Millisecond)
	}
	require.LessOrEqual(t, atDone.Load(), int64(2), "next requests while five jobs were worked")
}

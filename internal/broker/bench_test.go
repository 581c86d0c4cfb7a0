package broker_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/broker"
	"github.com/jobgate/jobgate/internal/brokertest"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/jobtest"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/stretchr/testify/require"
)

// 10,000 requesters with one job each, admitted at once, on an idle worker
// process (16 slots): how long from a job's admission to its start (p50,
// p99, max), and the jobs started per second. Issue 22: every job starts
// within seconds; the consumer-per-requester queue stalled past 1,000.
func BenchmarkTenThousandRequesters(b *testing.B) {
	for range b.N {
		b.StopTimer()
		tenv := jobtest.Start(b)
		brokertest.Start(b, tenv, broker.Config{})
		var mu sync.Mutex
		started := map[string]time.Time{}
		conn := tenv.Connect(b, "worker")
		w, err := worker.New(worker.Config{Conn: conn.NC, Name: "bench", Credential: wire.JobgateCredential, PullWait: time.Second, NewcomerSlots: -1})
		require.NoError(b, err)
		require.NoError(b, worker.Register(w, worker.Type[permitParams]{Name: "permit_report", Schema: permitSchema, Concurrency: 16,
			Work: func(_ context.Context, j *worker.Job[permitParams]) error {
				mu.Lock()
				started[j.ID] = time.Now()
				mu.Unlock()
				return nil
			}}))
		require.NoError(b, w.Start(context.Background()))
		const n = 10_000
		admitted := make(map[string]time.Time, n)
		recs := make([]*job.Record, n)
		b.StartTimer()
		began := time.Now()
		for i := range recs {
			recs[i] = tenv.Admit(b, conn.Res, jobtest.Request{Tenant: "T" + strconv.Itoa(i%50), Requester: "r" + strconv.Itoa(i), Key: "k", Pages: 1})
			admitted[recs[i].ID] = time.Now()
		}
		deadline := time.Now().Add(10 * time.Minute)
		for {
			mu.Lock()
			got := len(started)
			mu.Unlock()
			if got == n {
				break
			}
			require.True(b, time.Now().Before(deadline), "%d of %d started", got, n)
			time.Sleep(50 * time.Millisecond)
		}
		took := time.Since(began)
		b.StopTimer()
		require.NoError(b, w.Stop(context.Background()))
		waits := make([]time.Duration, 0, n)
		for id, at := range started {
			waits = append(waits, at.Sub(admitted[id]))
		}
		slices.Sort(waits)
		b.ReportMetric(waits[n/2].Seconds(), "p50-start-s")
		b.ReportMetric(waits[n*99/100].Seconds(), "p99-start-s")
		b.ReportMetric(waits[n-1].Seconds(), "max-start-s")
		b.ReportMetric(float64(n)/took.Seconds(), "jobs/s")
	}
}

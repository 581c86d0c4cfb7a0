package broker_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/broker"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/test/brokertest"
	"github.com/jobgate/jobgate/test/jobtest"
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

// A backlog of jobs in a few lanes (8 requesters of one tenant, as the
// bench's pipeline section) worked by one 100-slot worker process whose
// handler does nothing: the jobs per second of the broker's path alone
// (next, claim, done, event, removal), without admission or the relay.
// limited: the type declares the flow section's limits (a concurrency key
// per requester, limit 1,000, and a rate limit of 10,000/s for the type),
// which hold no job back: what taking a place and a token costs.
// priority: no limits, every job of priority 2 (not the default): what
// reading a lane by priority costs.
func BenchmarkBrokerThroughput(b *testing.B) {
	for _, v := range []string{"plain", "limited", "priority"} {
		b.Run(v, func(b *testing.B) { brokerThroughput(b, v == "limited", v == "priority") })
	}
}

// unthrottled is a credential's request rate the benchmark never reaches:
// the worker's one credential would otherwise be held to the broker's
// default (2,000 requests a second, a burst of 4,000), and what is
// measured would be that limit and the workers' backoff from it.
const unthrottled = 1e9

func brokerThroughput(b *testing.B, limited, prioritized bool) {
	for range b.N {
		b.StopTimer()
		tenv := jobtest.Start(b)
		brokertest.Start(b, tenv, broker.Config{Rate: unthrottled, Burst: unthrottled})
		conn := tenv.Connect(b, "worker")
		n := benchJobs()
		for i := range n {
			var edit func(*job.Record)
			if prioritized {
				edit = func(rec *job.Record) { rec.Priority = 2 }
			}
			tenv.AdmitAs(b, conn.Res, jobtest.Request{Tenant: "4", Requester: "r" + strconv.Itoa(i%8), Key: "k" + strconv.Itoa(i), Pages: 1}, edit)
		}
		var done sync.WaitGroup
		done.Add(n)
		w, err := worker.New(worker.Config{Conn: conn.NC, Name: "bench", Credential: wire.JobgateCredential, PullWait: time.Second,
			OnAttempt: func(_, outcome string, _ time.Duration) {
				if outcome == "succeeded" {
					done.Done()
				}
			}})
		require.NoError(b, err)
		typ := worker.Type[permitParams]{Name: "permit_report", Schema: permitSchema, Concurrency: 100,
			Work: func(context.Context, *worker.Job[permitParams]) error { return nil }}
		if limited {
			typ.ConcurrencyKeys = []api.ConcurrencyKey{{Key: api.KeyRequester, Limit: 1000}}
			typ.RateLimit = &api.RateLimit{PerSecond: 10000, Burst: 10000, Key: api.KeyType}
		}
		require.NoError(b, worker.Register(w, typ))
		b.StartTimer()
		began, cpu0 := time.Now(), cpuTime()
		require.NoError(b, w.Start(context.Background()))
		done.Wait()
		took, cpu := time.Since(began), cpuTime()-cpu0
		b.StopTimer()
		require.NoError(b, w.Stop(context.Background()))
		b.ReportMetric(float64(n)/took.Seconds(), "jobs/s")
		b.ReportMetric(cpu.Seconds()/took.Seconds(), "cores")
		b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-µs/job")
	}
}

// cpuTime is the CPU time this process used so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchJobs is BenchmarkBrokerThroughput's backlog: 5,000 jobs, or
// JOBGATE_BENCH_JOBS (deeper lanes cost more to read).
func benchJobs() int {
	if n, err := strconv.Atoi(os.Getenv("JOBGATE_BENCH_JOBS")); err == nil && n > 0 {
		return n
	}
	return 5000
}

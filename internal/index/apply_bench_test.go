package index

import (
	"context"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// BenchmarkApply measures the index's apply under the pipeline's load: an
// index already holding 30,000 jobs takes batches of 2,000 changes, each
// job admitted, claimed and finished (three changes), with random ids as
// the gateway derives them. The figure is CPU per job, which the
// admissions of the gateway's process share.
//
//	go test -run '^$' -bench BenchmarkApply -benchmem ./internal/index
func BenchmarkApply(b *testing.B) {
	const benchBatchJobs = batchSize / 3 // three changes a job: a full batch
	src := &chanSource{changes: make(chan natsjs.RecordChange)}
	x, err := Open(filepath.Join(b.TempDir(), "index.db"), src, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	if err := x.CatchUp(context.Background(), 10*time.Second); err != nil {
		b.Fatal(err)
	}
	rev := uint64(0)
	n := 0
	batchOf := func(jobs int) []natsjs.RecordChange {
		batch := make([]natsjs.RecordChange, 0, 3*jobs)
		at := time.Now().UTC()
		for range jobs {
			n++
			r := &job.Record{ID: job.DeriveID([]byte("bench"), "t", "r", strconv.Itoa(n)), Tenant: "t" + strconv.Itoa(n%10), Requester: "r" + strconv.Itoa(n%1000),
				KeyHash: "0123456789abcdef", Fingerprint: "sha256:0123456789abcdef0123456789abcdef", Type: "bench_noop",
				Params: []byte(`{"permit_id":"P-1234","pages":1}`), State: job.StateQueued, Attempt: 0,
				CreatedAt: at, UpdatedAt: at}
			for _, st := range []job.State{job.StateQueued, job.StateRunning, job.StateSucceeded} {
				rev++
				r.State, r.Revision = st, rev
				switch st {
				case job.StateRunning:
					r.Attempt, r.StartedAt, r.Worker, r.ClaimID = 1, &at, "w-1", "c-1"
				case job.StateSucceeded:
					r.FinishedAt, r.Worker = &at, ""
					r.Output = &job.Output{ContentType: "application/pdf", Size: 1024}
				}
				c, err := natsjs.ChangeOf(r)
				if err != nil {
					b.Fatal(err)
				}
				batch = append(batch, c)
			}
		}
		return batch
	}
	for range 30_000 / benchBatchJobs {
		if err := x.apply(batchOf(benchBatchJobs)); err != nil {
			b.Fatal(err)
		}
	}
	batches := make([][]natsjs.RecordChange, 0, 64)
	for range 64 {
		batches = append(batches, batchOf(benchBatchJobs))
	}
	b.ResetTimer()
	cpu0 := cpuTime()
	i := 0
	for b.Loop() {
		if i == len(batches) {
			b.StopTimer()
			batches = batches[:0]
			for range 64 {
				batches = append(batches, batchOf(benchBatchJobs))
			}
			i = 0
			b.StartTimer()
		}
		if err := x.apply(batches[i]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*benchBatchJobs), "µs/job")
	// The process's CPU (GC included), which a busy machine does not
	// inflate as it does the elapsed time.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N*benchBatchJobs), "cpu-µs/job")
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

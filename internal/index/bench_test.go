package index

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
)

var benchJobs = flag.Int("index-jobs", 100_000, "jobs stored in the index of BenchmarkIndex")

// BenchmarkIndex builds an index of -index-jobs jobs (10 tenants, 1,000
// requesters, 20 types, every state) from a change log fed as fast as the
// index reads it, then measures a page of the admin listing with each
// filter, a requester's first page and the stats of a tenant: p50 and p99
// per call, the file's size and the process's RSS.
//
//	go test -run '^$' -bench BenchmarkIndex -benchtime 2000x -index-jobs 1000000 ./internal/index
func BenchmarkIndex(b *testing.B) {
	n := *benchJobs
	src := &chanSource{changes: make(chan natsjs.RecordChange, 4096)}
	path := filepath.Join(b.TempDir(), "index.db")
	x, err := Open(path, src, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	states := []job.State{job.StateQueued, job.StateRunning, job.StateSucceeded, job.StateSucceeded, job.StateSucceeded, job.StateFailed, job.StateCanceled}
	base := time.Now().UTC().Add(-24 * time.Hour)
	began := time.Now()
	for i := range n {
		at := base.Add(time.Duration(i) * (24 * time.Hour / time.Duration(n)))
		r := &job.Record{ID: benchID(i), Tenant: "t" + strconv.Itoa(i%10), Requester: "r" + strconv.Itoa(i%1000),
			Type: "type_" + strconv.Itoa(i%20), Params: []byte(`{}`), State: states[i%len(states)],
			CreatedAt: at, UpdatedAt: at, Attempt: 1, Revision: uint64(i + 1)}
		switch r.State {
		case job.StateFailed:
			r.Error = &job.Failure{Category: job.CategoryRenderError, Message: "x"}
			fallthrough
		case job.StateSucceeded, job.StateCanceled:
			r.FinishedAt = &at
		}
		c, err := natsjs.ChangeOf(r)
		if err != nil {
			b.Fatal(err)
		}
		src.mu.Lock()
		src.last = r.Revision
		src.mu.Unlock()
		src.changes <- c
	}
	if err := x.CatchUp(context.Background(), 30*time.Minute); err != nil {
		b.Fatal(err)
	}
	built := time.Since(began)
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	rng := rand.New(rand.NewPCG(1, 2))
	queries := []struct {
		name string
		q    func() Query
	}{
		{"tenant", func() Query { return Query{Tenant: "t" + strconv.Itoa(rng.IntN(10)), Limit: 50} }},
		{"tenant+type+state", func() Query {
			return Query{Tenant: "t" + strconv.Itoa(rng.IntN(10)), Type: "type_" + strconv.Itoa(rng.IntN(20)), State: job.StateFailed, Limit: 50}
		}},
		{"category", func() Query { return Query{Category: job.CategoryRenderError, Limit: 50} }},
		{"requester", func() Query {
			i := rng.IntN(1000)
			return Query{Tenant: "t" + strconv.Itoa(i%10), Requester: "r" + strconv.Itoa(i), Limit: 20}
		}},
	}
	b.ResetTimer()
	for _, qc := range queries {
		b.Run("page/"+qc.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				q := qc.q()
				t0 := time.Now()
				if _, err := x.Page(q); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
			}
			report(b, took)
		})
	}
	b.Run("stats", func(b *testing.B) {
		var took []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, err := x.Stats("t"+strconv.Itoa(rng.IntN(10)), time.Now()); err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(t0))
		}
		report(b, took)
	})
	b.Run("footprint", func(b *testing.B) {
		for b.Loop() {
		}
		b.ReportMetric(float64(fi.Size())/float64(1<<20), "index-MiB")
		b.ReportMetric(float64(rssBytes())/float64(1<<20), "rss-MiB")
		b.ReportMetric(built.Seconds(), "build-s")
	})
}

func benchID(i int) string {
	s := strconv.Itoa(i)
	return "job_" + strings.Repeat("a", 26-len(s)) + strings.Map(func(r rune) rune { return 'a' + (r - '0') }, s)
}

func report(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	if len(took) == 0 {
		return
	}
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}

// rssBytes is the process's resident set (Linux), 0 elsewhere.
func rssBytes() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}

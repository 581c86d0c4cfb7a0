package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

// TestScheduleLatenessAtScale measures the scheduled set at scale, on the
// embedded JetStream of one process (server, dispatcher and test): the heap
// per scheduled job, with JOBGATE_SCHEDULE_BENCH (default 100000) jobs
// scheduled an hour ahead, and the lateness (run_at to queued) of
// JOBGATE_SCHEDULE_BENCH_DUE more (default 10000) due within a minute,
// spread evenly, while the others wait. It is a measurement, not part of
// make test: JOBGATE_SCHEDULE_BENCH=100000 go test -run
// TestScheduleLatenessAtScale -v ./dispatcher (docs/api.md, "Flow fields").
func TestScheduleLatenessAtScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("JOBGATE_SCHEDULE_BENCH"))
	if n == 0 {
		t.Skip("a measurement: set JOBGATE_SCHEDULE_BENCH to the number of jobs scheduled ahead (e.g. 100000)")
	}
	due, _ := strconv.Atoi(os.Getenv("JOBGATE_SCHEDULE_BENCH_DUE"))
	if due == 0 {
		due = 10000
	}
	_, b := setup(t, func(c *Config) { c.QueuedCheckAfter = time.Hour; c.SweepInterval = 5 * time.Second })
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	params := json.RawMessage(`{"case_id":1,"pages":1,"revision":1}`)
	create := func(prefix string, count int, runAt func(i int) time.Time) {
		var wg sync.WaitGroup
		next := make(chan int)
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					now := time.Now().UTC()
					at := runAt(i).UTC()
					r := &job.Record{ID: fmt.Sprintf("job_%s%022d", prefix, i), Tenant: "b", Requester: "r" + strconv.Itoa(i%100),
						KeyHash: "k", Fingerprint: "f", Type: "permit_report", Params: params,
						State: job.StateScheduled, CreatedAt: now, UpdatedAt: now, RunAt: &at}
					cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					err := b.conn.Res.Jobs.Create(cctx, r)
					cancel()
					if err != nil {
						t.Errorf("create %s: %v", r.ID, err)
						return
					}
				}
			}()
		}
		for i := range count {
			next <- i
		}
		close(next)
		wg.Wait()
	}

	// The scheduled set's own cost: entries alone (of jobs that do not
	// exist, due in two hours, after the test).
	before := heap()
	two := time.Now().Add(2 * time.Hour)
	for i := range n {
		at := two.Add(time.Duration(i) * 10 * time.Millisecond)
		r := &job.Record{ID: fmt.Sprintf("job_eeee%022d", i), Tenant: "b", Requester: "r", RunAt: &at, CreatedAt: two}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		require.NoError(t, b.conn.Res.Schedule.Add(cctx, r))
		cancel()
	}
	time.Sleep(20 * time.Second) // the server's block caches expire after 10 s idle
	after := heap()
	t.Logf("%d entries alone: heap %d MiB before, %d MiB after: %.0f bytes per entry",
		n, before>>20, after>>20, float64(int64(after)-int64(before))/float64(n))

	before = heap()
	start := time.Now()
	hour := time.Now().Add(time.Hour)
	create("aaaa", n, func(i int) time.Time { return hour.Add(time.Duration(i) * 10 * time.Millisecond) })
	t.Logf("%d jobs scheduled an hour ahead, admitted in %s", n, time.Since(start).Round(time.Millisecond))
	waitDepthAtLeast(t, b, uint64(2*n), 10*time.Minute)
	t.Logf("the relay stored their entries %s after the first admission", time.Since(start).Round(time.Millisecond))
	time.Sleep(20 * time.Second) // the server's block caches expire after 10 s idle
	after = heap()
	t.Logf("heap of the process (embedded server, dispatcher, test): %d MiB before, %d MiB after: %.0f bytes per scheduled job",
		before>>20, after>>20, float64(int64(after)-int64(before))/float64(n))

	// Due jobs, spread over a minute starting 30 s from now, while the
	// others wait: lateness from the records' queued write.
	first := time.Now().Add(30 * time.Second)
	spread := time.Minute
	w, err := b.conn.Res.Jobs.Follow(ctx)
	require.NoError(t, err)
	defer w.Stop()
	late := make(chan time.Duration, due)
	go func() {
		synced := false
		for e := range w.Changes() {
			if e.Synced {
				synced = true
				continue
			}
			if !synced || e.Deleted {
				continue
			}
			r, err := e.Record()
			if err != nil || r.State != job.StateQueued || r.RunAt == nil || r.Tenant != "b" || r.ID[4:8] != "dddd" {
				continue
			}
			late <- r.UpdatedAt.Sub(*r.RunAt)
		}
	}()
	create("dddd", due, func(i int) time.Time { return first.Add(spread * time.Duration(i) / time.Duration(due)) })
	var all []time.Duration
	deadline := time.After(time.Until(first.Add(spread)) + 5*time.Minute)
	for len(all) < due {
		select {
		case d := <-late:
			all = append(all, d)
		case <-deadline:
			t.Fatalf("only %d of %d due jobs were queued", len(all), due)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	q := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
	t.Logf("lateness of %d due jobs (%.0f/s) with %d scheduled: p50 %s, p99 %s, max %s", due,
		float64(due)/spread.Seconds(), n, q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), all[len(all)-1].Round(time.Millisecond))
	require.Less(t, q(0.99), 2*time.Second, "p99 within the promise")
}

func waitDepthAtLeast(t *testing.T, b *testBundle, n uint64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		d, err := b.conn.Res.Schedule.Depth(ctx)
		cancel()
		if err == nil && d >= n {
			return
		}
		require.True(t, time.Now().Before(deadline), "the scheduled set holds %d of %d entries", d, n)
		time.Sleep(100 * time.Millisecond)
	}
}

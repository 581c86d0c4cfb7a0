package broker

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/stretchr/testify/require"
)

// Many idle requests waiting on one type, and jobs coming one at a time:
// each job wakes a request or two to take it, not every waiting request,
// so the work stream is read a few times a job, not once a waiting request
// a job (and again at every recheck of a lane just noticed). Every job is
// handed out all the same, each once.
func TestANewJobWakesOneWaitingRequestNotAll(t *testing.T) {
	t.Parallel()
	b, tb := setup(t)
	require.Nil(t, tb.declare(t, credA, "herd", "text/plain").Error)
	const waiters, jobs = 40, 10
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan *wire.Assignment, jobs)
	var wg sync.WaitGroup
	for w := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				r := tb.ask(t, credA, "herd", wire.OpNext, wire.NextRequest{Worker: "w-" + strconv.Itoa(w), WaitMS: 3000})
				if r.Error != nil {
					t.Errorf("next: %v", r.Error)
					return
				}
				if r.Job != nil {
					got <- r.Job
				}
			}
		}()
	}
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.waiting[credA] == waiters
	}, 10*time.Second, 5*time.Millisecond, "the requests all waiting")

	reads := tb.env.CountReads(t, natsjs.StreamWork)
	seen := map[string]bool{}
	for i := range jobs {
		rec := tb.admit(t, "herd", "herd-"+strconv.Itoa(i))
		select {
		case a := <-got:
			require.Equal(t, rec.Key(), a.Key)
			require.False(t, seen[a.Key], "each job once")
			seen[a.Key] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("job %d not handed out", i)
		}
		time.Sleep(50 * time.Millisecond)
	}
	n := reads.Load()
	t.Logf("%d reads of the work stream for %d jobs and %d waiting requests", n, jobs, waiters)
	require.LessOrEqual(t, n, int64(6*jobs), "reads of the work stream")
}

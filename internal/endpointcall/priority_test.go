package endpointcall_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/pkg/endpoint"
	"github.com/stretchr/testify/require"
)

// Through a whole deployment, a VIP's priority-1 job, submitted by
// POST /v1/jobs while another requester of the tenant has priority-5 jobs
// waiting, starts as soon as the one request in flight ends, though the
// other requester's turn has come; that one's jobs follow in order.
func TestAVIPsPriorityJobStartsBeforeAnotherRequestersBacklog(t *testing.T) {
	t.Parallel()
	d := start(t)
	vip, err := d.sys.Token(auth.Identity{Tenant: "acme", Requester: "vip"}, time.Hour)
	require.NoError(t, err)
	var mu sync.Mutex
	var order []int
	started := make(chan int, 16)
	hold := map[int]chan struct{}{0: make(chan struct{}), 100: make(chan struct{})}
	url := handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req endpoint.Request
		_ = json.NewDecoder(r.Body).Decode(&req)
		var p struct{ N int }
		_ = json.Unmarshal(req.Job.Params, &p)
		mu.Lock()
		order = append(order, p.N)
		mu.Unlock()
		started <- p.N
		if c := hold[p.N]; c != nil {
			<-c // holds the only request in flight
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	d.declare(t, "vip_first", url, map[string]any{"endpoint": map[string]any{"url": url, "concurrency": 1}})
	submit := func(token string, n, prio int) {
		t.Helper()
		status, data, _ := d.do(t, token, http.MethodPost, "/v1/jobs",
			fmt.Sprintf(`{"type":"vip_first","params":{"n":%d},"priority":%d}`, n, prio), "Idempotency-Key", fmt.Sprintf("vip-first-%d", n))
		require.Equal(t, http.StatusAccepted, status, string(data))
	}
	published := func(requester string, n int) {
		t.Helper()
		lanes := d.sys.Resources().Work.Lanes("vip_first")
		deadline := time.Now().Add(10 * time.Second)
		for {
			msgs, err := lanes.OldestBatch(context.Background(), "acme", requester, 0, 16, 1<<20)
			require.NoError(t, err)
			if len(msgs) == n {
				return
			}
			require.True(t, time.Now().Before(deadline), "the work of %s's %d jobs published", requester, n)
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitStart := func(n int) {
		t.Helper()
		select {
		case got := <-started:
			require.Equal(t, n, got)
		case <-time.After(20 * time.Second):
			t.Fatalf("job %d not started", n)
		}
	}

	// ann's first job runs; ann queues three of priority 5, the VIP one of
	// priority 5 too, which runs next (the VIP's turn), so that ann's turn
	// comes after it.
	submit(d.user, 0, 5)
	waitStart(0)
	for n := 51; n <= 53; n++ {
		submit(d.user, n, 5)
		// Each stored before the next is submitted: the relay publishes
		// different jobs' work in parallel, so jobs admitted a few
		// milliseconds apart may be stored, and start, in either order.
		published("ann", n-49)
	}
	submit(vip, 100, 5)
	published("ann", 4)
	published("vip", 1)
	close(hold[0])
	waitStart(100)
	// While the VIP's job runs, the VIP submits one of priority 1.
	submit(vip, 10, 1)
	published("vip", 2)
	close(hold[100])
	for _, n := range []int{10, 51, 52, 53} {
		waitStart(n)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int{0, 100, 10, 51, 52, 53}, order, "the VIP's priority-1 job first, then ann's in order")
}

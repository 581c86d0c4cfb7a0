package endpointcall_test

import (
	"context"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/dispatcher"
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/jobgate/jobgate/system"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// The endpoint's concurrency holds across the deployment: two more
// dispatchers beside serve's on one NATS run the type's requests, never
// more of them at once than the declared concurrency. Without the leased
// slots each dispatcher would run that many.
func TestConcurrencyHoldsAcrossDispatchers(t *testing.T) {
	t.Parallel()
	d := startThree(t)
	var c counting
	url := c.serve(t, 100*time.Millisecond)
	d.declare(t, "shared", url, map[string]any{"endpoint": map[string]any{"url": url, "concurrency": 3}})
	var ids []string
	for range 30 {
		ids = append(ids, d.submit(t, "shared", `{}`))
	}
	for _, id := range ids {
		require.Equal(t, "succeeded", d.until(t, id, 60*time.Second, terminal).State)
	}
	require.Equal(t, int64(30), c.calls.Load(), "each job's one attempt, one request")
	require.LessOrEqual(t, c.most.Load(), int64(3), "in flight across three dispatchers")
	require.Equal(t, int64(3), c.most.Load(), "the bound is reached, not undercut")
}

// startThree is serve and two more dispatchers on one NATS.
func startThree(t *testing.T) *deployment {
	t.Helper()
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:-1"})
	require.NoError(t, err)
	t.Cleanup(emb.Shutdown)

	settings := config.Default()
	settings.DataDir, settings.HTTPAddr, settings.NATS.URL = t.TempDir(), "127.0.0.1:0", emb.ClientURL()
	settings.AuthSecret = "0123456789abcdef0123456789abcdef"
	d := startWith(t, settings)
	for range 2 {
		more := config.Default()
		more.DataDir, more.NATS.URL, more.EndpointAllow = t.TempDir(), emb.ClientURL(), "127.0.0.0/8"
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		sys, err := system.Start(ctx, system.Config{Settings: &more, LogOutput: &jobtest.SyncBuffer{},
			Components: []system.Component{system.Dispatcher},
			Dispatcher: func(c *dispatcher.Config) { c.Broker.RetryBase = 200 * time.Millisecond }})
		cancel()
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, sys.Stop(ctx))
		})
	}

	return d
}

// The endpoint's rate holds across the deployment too: three dispatchers
// start at most rate_per_second requests a second between them. Without
// the shared windows each would start that many.
func TestRateHoldsAcrossDispatchers(t *testing.T) {
	t.Parallel()
	d := startThree(t)
	var mu sync.Mutex
	perSecond := map[int64]int{}
	url := handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		perSecond[time.Now().Unix()]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	d.declare(t, "paced", url, map[string]any{"endpoint": map[string]any{"url": url, "concurrency": 10, "rate_per_second": 4}})
	var ids []string
	for range 16 {
		ids = append(ids, d.submit(t, "paced", `{}`))
	}
	for _, id := range ids {
		require.Equal(t, "succeeded", d.until(t, id, 60*time.Second, terminal).State)
	}
	mu.Lock()
	defer mu.Unlock()
	// A request paced in one second's window may reach the handler a
	// moment into the next (a loaded machine: seen 7 in one second, then
	// 4, 4, 1), so any k seconds of arrivals hold at most the k+1 windows
	// they can have been paced in: 4(k+1). Three dispatchers pacing on
	// their own would start 12 in one second.
	total, first, last := 0, int64(math.MaxInt64), int64(0)
	for sec, n := range perSecond {
		total += n
		first, last = min(first, sec), max(last, sec)
	}
	for from := first; from <= last; from++ {
		sum := 0
		for to := from; to <= last; to++ {
			sum += perSecond[to]
			k := int(to - from + 1)
			require.LessOrEqual(t, sum, 4*(k+1), "%d requests in the %d seconds from %d: %v", sum, k, from, perSecond)
		}
	}
	require.Equal(t, 16, total)
	require.GreaterOrEqual(t, len(perSecond), 4, "16 requests at 4 a second take four seconds at least: %v", perSecond)
}

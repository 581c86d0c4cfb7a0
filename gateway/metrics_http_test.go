package gateway

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/stretchr/testify/require"
)

// scrape reads /metrics and returns the value of each series named by a
// line's name and labels, as Prometheus' text format writes it.
func scrape(t *testing.T, b *testBundle) map[string]float64 {
	t.Helper()
	r := b.do(t, http.MethodGet, "/metrics", "", "")
	require.Equal(t, http.StatusOK, r.status)
	out := map[string]float64{}
	for _, m := range regexp.MustCompile(`(?m)^(jobgate_[a-z_]+(?:\{[^}]*\})?) (\S+)$`).FindAllStringSubmatch(string(r.body), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err, m[0])
		out[m[1]] = v
	}
	return out
}

// Every answer is counted by the route's pattern (never the path: ids make
// no series), method and status, a 429 and a path no route matches
// included, and timed by route.
func TestRequestsAreCountedByRoutePatternAndStatus(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.Metrics = metrics.New(); c.ReadRate, c.ReadBurst = 0.001, 2 })
	tok := b.token(t, "4", "reviewer-47", false)
	id := b.submit(t, tok, "k-1", permit).job(t).ID
	for range 3 { // the burst is 2: the third is refused
		b.do(t, http.MethodGet, "/v1/jobs/"+id, tok, "")
	}
	require.Equal(t, http.StatusNotFound, b.do(t, http.MethodGet, "/no/such/route", tok, "").status)

	got := scrape(t, b)
	require.Equal(t, 1.0, got[`jobgate_http_requests_total{method="POST",route="/v1/jobs",status="202"}`])
	require.Equal(t, 2.0, got[`jobgate_http_requests_total{method="GET",route="/v1/jobs/:id",status="200"}`])
	require.Equal(t, 1.0, got[`jobgate_http_requests_total{method="GET",route="/v1/jobs/:id",status="429"}`])
	require.Equal(t, 1.0, got[`jobgate_http_rate_limited_total{route="/v1/jobs/:id"}`])
	require.Equal(t, 1.0, got[`jobgate_http_requests_total{method="GET",route="unmatched",status="404"}`])
	require.Equal(t, 3.0, got[`jobgate_http_request_duration_seconds_count{route="/v1/jobs/:id"}`])
	for series := range got {
		require.NotContains(t, series, id, "a job id in a label: one series per job")
	}
}

// The live workers and their slots per type come from the presence the
// workers announce, and a pause shows at once: what the "work and no
// worker" alert reads (every declared type has its series, 0 when no
// worker runs it).
func TestWorkersSlotsAndPausedTypesAreExported(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.Metrics = metrics.New() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.Eventually(t, func() bool {
		got := scrape(t, b)
		v, ok := got[`jobgate_workers{type="permit_report"}`]
		return ok && v == 0 && got[`jobgate_type_paused{type="permit_report"}`] == 0
	}, 10*time.Second, 20*time.Millisecond, "a declared type without a worker exports 0")

	now := time.Now().UTC()
	one := 1
	for _, p := range []natsjs.Presence{
		{Worker: "r-1", Type: "permit_report", Concurrency: 2, Busy: &one, StartedAt: now, SeenAt: now},
		{Worker: "r-2", Type: "permit_report", Concurrency: 3, StartedAt: now, SeenAt: now},
		{Worker: "r-old", Type: "permit_report", Concurrency: 5, StartedAt: now, SeenAt: now.Add(-time.Hour)},
	} {
		require.NoError(t, b.res.Types.Announce(ctx, p))
	}
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/v1/admin/types/permit_report/pause", b.operator(t, "root"), "").status)
	require.Eventually(t, func() bool {
		got := scrape(t, b)
		return got[`jobgate_workers{type="permit_report"}`] == 2 && got[`jobgate_worker_slots{type="permit_report"}`] == 5 &&
			got[`jobgate_worker_busy_slots{type="permit_report"}`] == 1 && got[`jobgate_type_paused{type="permit_report"}`] == 1
	}, 10*time.Second, 20*time.Millisecond, "two live workers (the silent one does not count), 5 slots, 1 busy, paused")
}

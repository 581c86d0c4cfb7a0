package metrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// gather reads every sample of one family as "label=value ..." → value.
func gather(t *testing.T, m *Metrics, family string) map[string]float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
		for _, s := range f.GetMetric() {
			key := ""
			for _, l := range s.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + " "
			}
			out[key] = s.GetGauge().GetValue()
		}
	}
	return out
}

func TestTenantQueuesAreBounded(t *testing.T) {
	t.Parallel()
	m := New()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var qs []TenantQueue
	for i := range TopN + 30 { // tenant i has i+1 queued jobs, the oldest queued i minutes ago
		qs = append(qs, TenantQueue{Tenant: fmt.Sprintf("t%03d", i), Depth: i + 1, Oldest: now.Add(-time.Duration(i) * time.Minute)})
	}
	m.SetTenantQueues(qs, now)
	depth := gather(t, m, "jobgate_tenant_queued_jobs")
	age := gather(t, m, "jobgate_tenant_oldest_queued_seconds")
	require.Len(t, depth, TopN+1, "the top %d tenants and other", TopN)
	require.Len(t, age, TopN+1)
	deepest := fmt.Sprintf("t%03d", TopN+29)
	require.Equal(t, float64(TopN+30), depth["tenant="+deepest+" "])
	require.Equal(t, float64(TopN+29)*60, age["tenant="+deepest+" "])
	var otherDepth float64
	for i := range 30 {
		otherDepth += float64(i + 1)
	}
	require.Equal(t, otherDepth, depth["tenant=other "], "the 30 smallest queues summed")
	require.Equal(t, 29.0*60, age["tenant=other "], "the oldest of the rest")

	// A queue that emptied disappears.
	m.SetTenantQueues([]TenantQueue{{Tenant: "t000", Depth: 1, Oldest: now}}, now)
	require.Equal(t, map[string]float64{"tenant=t000 ": 1}, gather(t, m, "jobgate_tenant_queued_jobs"))
}

func TestPendingDeliveriesAreBounded(t *testing.T) {
	t.Parallel()
	m := New()
	var ps []PendingDeliveries
	for i := range TopN + 5 {
		ps = append(ps, PendingDeliveries{Tenant: fmt.Sprintf("t%d", i), Destination: fmt.Sprintf("w%d", i), Channel: "webhook", Count: float64(i)})
	}
	ps = append(ps, PendingDeliveries{Tenant: "t0", Destination: "m0", Channel: "mail", Count: 0})
	m.ObservePendingDeliveries(func() []PendingDeliveries { return ps })
	got := gather(t, m, "jobgate_deliveries_pending")
	require.Len(t, got, TopN+2, "the top %d, other webhooks and other mail", TopN)
	require.Equal(t, float64(TopN+4), got["channel=webhook destination=w24 tenant=t24 "])
	require.Equal(t, float64(0+1+2+3+4), got["channel=webhook destination=other tenant=other "])
	require.Equal(t, 0.0, got["channel=mail destination=other tenant=other "])
}

// The tenants' result bytes are named only past half the quota, at most
// TopN of them; how many are at the admission mark is one number.
func TestTenantResultsAreBounded(t *testing.T) {
	t.Parallel()
	m := New()
	use := map[string]int64{"small": 100, "half": 500}
	for i := range TopN + 5 {
		use[fmt.Sprintf("t%03d", i)] = int64(600 + 10*i) // 600 to 840 of 1000
	}
	use["full"] = 950
	m.SetTenantResults(use, 1000, 0.9)
	bytes := gather(t, m, "jobgate_tenant_result_bytes")
	require.Len(t, bytes, TopN+1, "the top %d tenants and other", TopN)
	require.Equal(t, 950.0, bytes["tenant=full "])
	require.NotContains(t, bytes, "tenant=small ")
	require.NotContains(t, bytes, "tenant=half ", "half is not past half")
	require.Equal(t, float64(600+610+620+630+640+650), bytes["tenant=other "], "the six smallest past half, summed")
	require.Equal(t, map[string]float64{"": 1}, gather(t, m, "jobgate_tenants_at_result_quota"))
	require.Equal(t, map[string]float64{"": 1000}, gather(t, m, "jobgate_tenant_result_quota_bytes"))

	m.SetTenantResults(map[string]int64{"small": 100}, 1000, 0.9)
	require.Empty(t, gather(t, m, "jobgate_tenant_result_bytes"), "a tenant back under half disappears")
	require.Equal(t, map[string]float64{"": 0}, gather(t, m, "jobgate_tenants_at_result_quota"))
}

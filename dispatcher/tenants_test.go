package dispatcher

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// The sweeper exports each tenant's queue depth and oldest queued age from
// the jobs it tracks.
func TestQueueMetricsPerTenant(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	_, b := setup(t, func(c *Config) { c.Metrics = m })
	for i := range 3 {
		b.env.CommitAs(t, b.conn.Res, jobtest.Request{Tenant: "A", Requester: "alice", Key: fmt.Sprintf("a%d", i), Pages: 5}, nil)
	}
	b.env.CommitAs(t, b.conn.Res, jobtest.Request{Tenant: "B", Requester: "bob", Key: "b0", Pages: 5}, nil)
	depth := func(tenant string) float64 {
		fams, err := m.Registry.Gather()
		require.NoError(t, err)
		for _, f := range fams {
			if f.GetName() != "jobgate_tenant_queued_jobs" {
				continue
			}
			for _, s := range f.GetMetric() {
				if s.GetLabel()[0].GetValue() == tenant {
					return s.GetGauge().GetValue()
				}
			}
		}
		return 0
	}
	require.Eventually(t, func() bool { return depth("A") == 3 && depth("B") == 1 }, 20*time.Second, 20*time.Millisecond)
}

package metrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAttemptsAreCountedAndTimedByTypeAndOutcome(t *testing.T) {
	t.Parallel()
	m := New()
	m.Attempt("sales_export", "retry", 3*time.Second)
	m.Attempt("sales_export", "succeeded", 90*time.Second)
	m.Attempt("sales_export", "worker_lost", -1) // unknown duration: counted only
	fams, err := m.Registry.Gather()
	require.NoError(t, err)
	counts, observed := map[string]float64{}, map[string]uint64{}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			key := ""
			for _, l := range s.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + " "
			}
			switch f.GetName() {
			case "jobgate_attempts_total":
				counts[key] = s.GetCounter().GetValue()
			case "jobgate_attempt_duration_seconds":
				observed[key] = s.GetHistogram().GetSampleCount()
				require.Len(t, s.GetHistogram().GetBucket(), len(AttemptBuckets))
			}
		}
	}
	require.Equal(t, map[string]float64{"outcome=retry type=sales_export ": 1, "outcome=succeeded type=sales_export ": 1,
		"outcome=worker_lost type=sales_export ": 1}, counts)
	require.Equal(t, map[string]uint64{"outcome=retry type=sales_export ": 1, "outcome=succeeded type=sales_export ": 1}, observed)
}

func TestTypeQueuesNameAtMostTopNTenantsPerType(t *testing.T) {
	t.Parallel()
	m := New()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	oldest := map[string]time.Time{}
	for i := range TopN + 30 { // tenant i's oldest job was admitted i minutes ago
		oldest[fmt.Sprintf("t%03d", i)] = now.Add(-time.Duration(i) * time.Minute)
	}
	qs := []TypeQueue{
		{Type: "sales_export", Queued: TopN + 30, Running: 2, Retrying: 1, Oldest: oldest},
		{Type: "idle", Running: 1, Oldest: map[string]time.Time{}},
	}
	require.NoError(t, m.ObserveTypes(func() []TypeQueue { return qs }, func() time.Time { return now }))
	require.Error(t, m.ObserveTypes(func() []TypeQueue { return nil }, time.Now), "one source per registry")

	require.Equal(t, map[string]float64{
		"state=queued type=sales_export ": TopN + 30, "state=running type=sales_export ": 2, "state=retrying type=sales_export ": 1,
		"state=queued type=idle ": 0, "state=running type=idle ": 1, "state=retrying type=idle ": 0,
	}, gather(t, m, "jobgate_jobs"))
	age := gather(t, m, "jobgate_oldest_queued_seconds")
	require.Len(t, age, TopN+1, "the %d tenants whose jobs waited longest, and other", TopN)
	require.Equal(t, float64(TopN+29)*60, age["tenant=t049 type=sales_export "])
	require.Equal(t, 30.0*60, age["tenant=t030 type=sales_export "], "the 20th oldest")
	require.NotContains(t, age, "tenant=t029 type=sales_export ")
	require.Equal(t, 29.0*60, age["tenant=other type=sales_export "], "the oldest of the rest")
}

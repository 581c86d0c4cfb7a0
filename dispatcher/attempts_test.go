package dispatcher

import (
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/test/jobtest"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// series finds the sample of family with exactly these labels.
func series(t *testing.T, m *metrics.Metrics, family string, labels map[string]string) *dto.Metric {
	t.Helper()
	fams, err := m.Registry.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
		for _, s := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range s.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if len(got) == len(labels) {
				match := true
				for k, v := range labels {
					match = match && got[k] == v
				}
				if match {
					return s
				}
			}
		}
	}
	return nil
}

// The sweeper counts the attempts it ends, by the job's type: a silent
// attempt it re-dispatches as worker_lost (timed from its claim), a running
// attempt at the end of its retention as expired; the re-dispatched job is
// retrying.
func TestSweeperCountsTheAttemptsItEnds(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	_, b := setup(t, func(c *Config) { c.Metrics = m; c.RenderTimeout = time.Hour })
	claimed := time.Now().Add(-2 * time.Hour).UTC()
	silent := b.put(t, "silent-export", func(r *job.Record) {
		r.Type = "sales_export"
		require.NoError(t, r.Claim("exporter-gone", claimed))
	})
	expiring := b.put(t, "month-long-export", func(r *job.Record) {
		r.Type = "long_export"
		r.CreatedAt = time.Now().Add(-719*time.Hour - 30*time.Minute).UTC()
		require.NoError(t, r.Claim("exporter-alive", time.Now().Add(-time.Minute)))
		now := time.Now().UTC()
		r.HeartbeatAt = &now
	})

	jobtest.WaitFor(t, b.conn.Res, silent.Key(), 10*time.Second, func(r *job.Record) bool { return r.Worker == "" })
	require.Equal(t, job.StateFailed, jobtest.Terminal(t, b.conn.Res, expiring.Key(), 10*time.Second).State)

	lost := map[string]string{"type": "sales_export", "outcome": "worker_lost"}
	require.Eventually(t, func() bool { return series(t, m, "jobgate_attempts_total", lost) != nil }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 1.0, series(t, m, "jobgate_attempts_total", lost).GetCounter().GetValue())
	h := series(t, m, "jobgate_attempt_duration_seconds", lost).GetHistogram()
	require.EqualValues(t, 1, h.GetSampleCount())
	require.InDelta(t, 2*time.Hour.Seconds(), h.GetSampleSum(), 60, "from the claim to the sweep")

	expired := map[string]string{"type": "long_export", "outcome": "expired"}
	require.Eventually(t, func() bool { return series(t, m, "jobgate_attempts_total", expired) != nil }, 10*time.Second, 20*time.Millisecond)
	require.EqualValues(t, 1, series(t, m, "jobgate_attempt_duration_seconds", expired).GetHistogram().GetSampleCount())

	require.Eventually(t, func() bool {
		s := series(t, m, "jobgate_jobs", map[string]string{"type": "sales_export", "state": "retrying"})
		return s != nil && s.GetGauge().GetValue() == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.Nil(t, series(t, m, "jobgate_jobs", map[string]string{"type": "long_export", "state": "running"}), "an ended job is not open")
}

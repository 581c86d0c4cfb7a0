package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ScheduleBuckets are the bounds of jobgate_schedule_lateness_seconds: the
// promise is a start within 2 s of run_at, so the buckets are fine below
// that and coarse above (an outage's backlog).
var ScheduleBuckets = []float64{0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 5, 10, 60, 600}

func newScheduleMetrics(m *Metrics) {
	m.ScheduledDepth = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "jobgate_scheduled_jobs",
		Help: "Entries in the scheduled set (jobs admitted with a run_at ahead, not yet queued), as a dispatcher last read them.",
	})
	m.ScheduleLate = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "jobgate_schedule_lateness_seconds",
		Help:    "From a scheduled job's run_at to its move to queued (or its deadline cancel).",
		Buckets: ScheduleBuckets,
	})
}

// SetScheduledDepth sets the entries of the scheduled set.
func (m *Metrics) SetScheduledDepth(n uint64) {
	if m != nil {
		m.ScheduledDepth.Set(float64(n))
	}
}

// ScheduleLateness records how late a scheduled job was woken.
func (m *Metrics) ScheduleLateness(d time.Duration) {
	if m != nil {
		m.ScheduleLate.Observe(max(0, d.Seconds()))
	}
}

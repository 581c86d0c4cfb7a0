package metrics

import "time"

// Admission counts one submission outcome and, for admitted or replayed
// ones, its latency.
func (m *Metrics) Admission(outcome string, took time.Duration) {
	if m == nil {
		return
	}
	m.Admissions.WithLabelValues(outcome).Inc()
	if outcome == "new" || outcome == "replayed" {
		m.AdmissionDuration.Observe(took.Seconds())
	}
}

// LongPoll adds delta waiting long-polls.
func (m *Metrics) LongPoll(delta int) {
	if m != nil {
		m.LongPolls.Add(float64(delta))
	}
}

// Relayed counts one message the relay published (kind work or event).
func (m *Metrics) Relayed(kind string) {
	if m != nil {
		m.RelayPublished.WithLabelValues(kind).Inc()
	}
}

// SetRelayBacklog sets the relay's pending record changes.
func (m *Metrics) SetRelayBacklog(n uint64) {
	if m != nil {
		m.RelayBacklog.Set(float64(n))
	}
}

// SetJobs sets the number of jobs in a state.
func (m *Metrics) SetJobs(state string, n int) {
	if m != nil {
		m.JobsByState.WithLabelValues(state).Set(float64(n))
	}
}

// StalledJob counts one stalled job the sweeper handled.
func (m *Metrics) StalledJob(outcome string) {
	if m != nil {
		m.Stalled.WithLabelValues(outcome).Inc()
	}
}

// Render counts one render attempt and its duration.
func (m *Metrics) Render(outcome string, took time.Duration) {
	if m == nil {
		return
	}
	m.RenderAttempts.WithLabelValues(outcome).Inc()
	m.RenderDuration.WithLabelValues(outcome).Observe(took.Seconds())
}

package metrics

import "github.com/prometheus/client_golang/prometheus"

func newFlowMetrics(m *Metrics) {
	m.FlowBlocked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobgate_flow_held_back_total",
		Help: "Starts a type's flow control held back, by type and the limit's class: tenant, requester or params (a concurrency key at its limit) or rate (the rate bucket empty). A held-back job waits queued and costs no attempt.",
	}, []string{"type", "class"})
	m.FlowPlaces = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jobgate_flow_places_taken_total",
		Help: "Concurrency places taken for the attempts this dispatcher started, by type and key class (tenant, requester, params).",
	}, []string{"type", "class"})
}

// FlowHeldBack counts a start of a job of typ held back by a limit of
// class (the broker's OnFlow).
func (m *Metrics) FlowHeldBack(typ, class string) {
	if m != nil {
		m.FlowBlocked.WithLabelValues(typ, class).Inc()
	}
}

// FlowPlaceTaken counts a concurrency place taken for a start.
func (m *Metrics) FlowPlaceTaken(typ, class string) {
	if m != nil {
		m.FlowPlaces.WithLabelValues(typ, class).Inc()
	}
}

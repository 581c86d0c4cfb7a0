package metrics

import "github.com/prometheus/client_golang/prometheus"

func newFlowMetrics(m *Metrics) {
	newFlowGauges(m)
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

func newFlowGauges(m *Metrics) {
	m.FlowInUse = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "jobgate_flow_places_in_use",
		Help: "Concurrency places held now across the deployment, by type and key class (tenant, requester, params), as a dispatcher last read them (aggregate with max).",
	}, []string{"type", "key_class"})
	m.FlowWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "jobgate_flow_waiting_jobs",
		Help: "Jobs held back now by their type's flow control, by type and reason (concurrency: waiting for a place; rate_limit: waiting for a rate token), as this dispatcher sees them (every dispatcher sees the same jobs: aggregate with max).",
	}, []string{"type", "reason"})
}

// SetFlowCensus sets the flow gauges: the places in use (type → key class
// → places) and the jobs waiting (type → reason → jobs); a series not
// named keeps its value (the caller names the ones gone, with 0).
func (m *Metrics) SetFlowCensus(inUse, waiting map[string]map[string]int) {
	if m == nil {
		return
	}
	set := func(g *prometheus.GaugeVec, v map[string]map[string]int) {
		for typ, by := range v {
			for label, n := range by {
				g.WithLabelValues(typ, label).Set(float64(n))
			}
		}
	}
	set(m.FlowInUse, inUse)
	set(m.FlowWaiting, waiting)
}

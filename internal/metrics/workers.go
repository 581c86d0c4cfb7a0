package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// TypeWorkers is one declared job type as a gateway sees it: its live
// worker processes (the presence they announce) and whether an operator
// paused it.
type TypeWorkers struct {
	Type string
	// Endpoint types are called by the dispatchers, not run by worker
	// processes: they have no worker series, only jobgate_type_paused.
	Endpoint bool
	Paused   bool
	// Workers are the live processes that announced the type, Slots their
	// declared concurrency summed, Busy the slots they said were running a
	// job (a process of an earlier protocol revision does not say, and
	// counts none).
	Workers, Slots, Busy int
}

// ObserveTypeWorkers exports, from read at scrape time, for every declared
// type but endpoint types jobgate_workers{type}, jobgate_worker_slots{type}
// and jobgate_worker_busy_slots{type} (0 when no worker runs it, which is
// what the "work and no worker" alert looks for), and for every declared
// type jobgate_type_paused{type} (1 paused, 0 not). Every gateway watches
// the same presence and declarations: aggregate with max, not sum. The
// type table bounds the types (1,000), so at most 4 series per type.
func (m *Metrics) ObserveTypeWorkers(read func() []TypeWorkers) error {
	if m == nil {
		return nil
	}
	return m.Registry.Register(&typeWorkers{
		workers: prometheus.NewDesc("jobgate_workers",
			"Live worker processes of each job type (endpoint types excluded), from the presence they announce.", []string{"type"}, nil),
		slots: prometheus.NewDesc("jobgate_worker_slots",
			"Slots of each job type's live worker processes: their declared concurrency summed.", []string{"type"}, nil),
		busy: prometheus.NewDesc("jobgate_worker_busy_slots",
			"Slots of each job type's live worker processes running a job at their last hello.", []string{"type"}, nil),
		paused: prometheus.NewDesc("jobgate_type_paused",
			"1 for a job type an operator paused (its jobs are admitted and wait queued), 0 for any other declared type.", []string{"type"}, nil),
		read: read,
	})
}

type typeWorkers struct {
	workers, slots, busy, paused *prometheus.Desc
	read                         func() []TypeWorkers
}

func (c *typeWorkers) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.workers
	ch <- c.slots
	ch <- c.busy
	ch <- c.paused
}

func (c *typeWorkers) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.read() {
		paused := 0.0
		if t.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, paused, t.Type)
		if t.Endpoint {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(t.Workers), t.Type)
		ch <- prometheus.MustNewConstMetric(c.slots, prometheus.GaugeValue, float64(t.Slots), t.Type)
		ch <- prometheus.MustNewConstMetric(c.busy, prometheus.GaugeValue, float64(t.Busy), t.Type)
	}
}

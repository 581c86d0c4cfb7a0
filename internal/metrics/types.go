package metrics

import (
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Attempt counts one ended attempt of a job of typ (jobgate_attempts_total)
// and observes its duration, claim to verdict
// (jobgate_attempt_duration_seconds); a negative took (unknown: the
// attempt's history entry is gone) is counted and not observed.
func (m *Metrics) Attempt(typ, outcome string, took time.Duration) {
	if m == nil {
		return
	}
	m.Attempts.WithLabelValues(typ, outcome).Inc()
	if took >= 0 {
		m.AttemptDuration.WithLabelValues(typ, outcome).Observe(took.Seconds())
	}
}

// TypeQueue is one job type's open jobs, as the dispatcher tracks them.
type TypeQueue struct {
	Type string
	// Queued waits for its first attempt; Running is held by a worker;
	// Retrying is running between attempts, waiting for the next.
	Queued, Running, Retrying int
	// Oldest is, per tenant with queued jobs of the type, when its oldest
	// queued job was admitted.
	Oldest map[string]time.Time
}

// ObserveTypes exports, from read at scrape time, jobgate_jobs{type,state}
// (queued, running, retrying; every type with an open job) and
// jobgate_oldest_queued_seconds{type,tenant}: per type, the TopN tenants
// whose oldest queued job waited longest by name, and the oldest of the
// rest as "other". The type table bounds the types (1,000), so the series
// are at most 3 and TopN+1 per type. It fails when another source already
// exports them from this registry.
func (m *Metrics) ObserveTypes(read func() []TypeQueue, now func() time.Time) error {
	if m == nil {
		return nil
	}
	return m.Registry.Register(&typeQueues{
		jobs: prometheus.NewDesc("jobgate_jobs",
			"Open jobs by type and state (queued, running, retrying: running between two attempts), as the dispatcher sees them.",
			[]string{"type", "state"}, nil),
		oldest: prometheus.NewDesc("jobgate_oldest_queued_seconds",
			"Age of the oldest queued job per type and tenant, since its admission: per type the tenants whose oldest "+
				"job waited longest by name, the oldest of the rest as \"other\".",
			[]string{"type", "tenant"}, nil),
		read: read, now: now,
	})
}

type typeQueues struct {
	jobs, oldest *prometheus.Desc
	read         func() []TypeQueue
	now          func() time.Time
}

func (c *typeQueues) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.jobs
	ch <- c.oldest
}

func (c *typeQueues) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	for _, q := range c.read() {
		for state, n := range map[string]int{"queued": q.Queued, "running": q.Running, "retrying": q.Retrying} {
			ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(n), q.Type, state)
		}
		type tenantSince struct {
			tenant string
			since  time.Time
		}
		all := make([]tenantSince, 0, len(q.Oldest))
		for tenant, since := range q.Oldest {
			all = append(all, tenantSince{tenant, since})
		}
		sort.Slice(all, func(i, j int) bool {
			if !all[i].since.Equal(all[j].since) {
				return all[i].since.Before(all[j].since)
			}
			return all[i].tenant < all[j].tenant
		})
		for i, x := range all {
			tenant := x.tenant
			if i == TopN {
				tenant = Other // the oldest of the rest
			} else if i > TopN {
				break
			}
			ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, max(now.Sub(x.since).Seconds(), 0), q.Type, tenant)
		}
	}
}

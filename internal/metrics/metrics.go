// Package metrics defines jobgate's Prometheus metrics in one place, so every
// component of a process registers into one registry and names follow one
// convention (jobgate_<what>_total, _seconds). A nil *Metrics is valid and
// records nothing, which keeps components usable without metrics in tests.
package metrics

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

// Metrics holds every jobgate metric.
type Metrics struct {
	Registry *prometheus.Registry

	Admissions        *prometheus.CounterVec   // outcome: new, replayed, conflict, invalid, unavailable, storage_full
	AdmissionDuration prometheus.Histogram     // seconds per admitted or replayed submission
	LongPolls         prometheus.Gauge         // waiting long-polls
	RelayPublished    *prometheus.CounterVec   // kind: work, event
	RelayBacklog      prometheus.Gauge         // record changes not yet relayed
	JobsByState       *prometheus.GaugeVec     // state
	Stalled           *prometheus.CounterVec   // outcome: redispatched, failed, expired
	RenderDuration    *prometheus.HistogramVec // outcome
	RenderAttempts    *prometheus.CounterVec   // outcome: succeeded, retry, failed, canceled, skipped
	TenantQueued      *prometheus.GaugeVec     // tenant (TopN + "other"): queued jobs
	TenantOldest      *prometheus.GaugeVec     // tenant (TopN + "other"): age of the oldest queued job
	StorageBytes      *prometheus.GaugeVec     // resource: bytes stored
	StorageBudget     *prometheus.GaugeVec     // resource: byte budget (0: none)
	Attempts          *prometheus.CounterVec   // type, outcome: attempts of every type as the broker and sweeper judged them
	AttemptDuration   *prometheus.HistogramVec // type, outcome: claim to verdict
	ScheduledDepth    prometheus.Gauge         // entries of the scheduled set (schedule.go)
	ScheduleLate      prometheus.Histogram     // run_at to queued
	FlowBlocked       *prometheus.CounterVec   // type, class: starts a flow limit held back (flow.go)
	FlowPlaces        *prometheus.CounterVec   // type, class: concurrency places taken
	FlowInUse         *prometheus.GaugeVec     // type, key_class: concurrency places held now
	FlowWaiting       *prometheus.GaugeVec     // type, reason: jobs held back now

	// The tenants' result quota (internal/tenantquota), as a gateway last
	// read the stored results: the quota, how many tenants are at the
	// admission mark, the bytes of those past half of it (TopN + "other"),
	// and the refusals (stage: admission, upload).
	TenantResultQuota      prometheus.Gauge
	TenantsAtResultQuota   prometheus.Gauge
	TenantResultBytes      *prometheus.GaugeVec
	TenantResultsQuotaFull *prometheus.CounterVec
}

// AttemptBuckets are the bounds of jobgate_attempt_duration_seconds: from
// a second to four hours, for types whose jobs take seconds to hours.
var AttemptBuckets = []float64{0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400}

// New creates the metrics and registers them (plus Go and process
// collectors) in a fresh registry.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		StorageBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "jobgate_storage_bytes", Help: "Bytes stored in each budgeted stream, bucket and object store, as a gateway last read them.",
		}, []string{"resource"}),
		StorageBudget: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "jobgate_storage_budget_bytes", Help: "Byte budget of each stream, bucket and object store (0: none); admission stops at 90% of any.",
		}, []string{"resource"}),
		TenantResultQuota: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobgate_tenant_result_quota_bytes", Help: "Each tenant's result quota: the bytes of result files one tenant may have stored.",
		}),
		TenantsAtResultQuota: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobgate_tenants_at_result_quota",
			Help: "Tenants whose stored results fill 90% or more of their result quota (their admissions answer 507), as a gateway last read them.",
		}),
		TenantResultBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "jobgate_tenant_result_bytes",
			Help: "Stored result bytes of the tenants past half their result quota, as a gateway last read them: the largest by name, the rest summed as \"other\".",
		}, []string{"tenant"}),
		TenantResultsQuotaFull: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobgate_tenant_results_quota_full_total",
			Help: "Refusals for a tenant's result quota: admissions answered 507 (stage admission), results refused and their jobs failed budget_exceeded (stage upload).",
		}, []string{"stage"}),
		Admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobgate_admissions_total", Help: "Submissions by outcome.",
		}, []string{"outcome"}),
		AdmissionDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "jobgate_admission_duration_seconds", Help: "Time to admit or replay a submission.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 5},
		}),
		LongPolls: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobgate_long_polls", Help: "Long-poll requests waiting for a change.",
		}),
		RelayPublished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobgate_relay_published_total", Help: "Messages the dispatcher relay published, by kind.",
		}, []string{"kind"}),
		RelayBacklog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jobgate_relay_backlog", Help: "Job record changes waiting for the relay.",
		}),
		JobsByState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "jobgate_open_jobs", Help: "Jobs not yet terminal, by state, as the dispatcher sees them.",
		}, []string{"state"}),
		Stalled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobgate_stalled_jobs_total", Help: "Jobs the sweeper handled (stalled running jobs, lost work, open jobs at the end of their retention), by outcome.",
		}, []string{"outcome"}),
		RenderDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "jobgate_render_duration_seconds", Help: "Duration of render attempts, by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 12),
		}, []string{"outcome"}),
		RenderAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobgate_render_attempts_total", Help: "Render attempts by outcome.",
		}, []string{"outcome"}),
		TenantQueued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "jobgate_tenant_queued_jobs",
			Help: "Queued jobs per tenant, as the dispatcher sees them: the tenants with the deepest queues by name, the rest summed as \"other\".",
		}, []string{"tenant"}),
		Attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobgate_attempts_total",
			Help: "Attempts of every job type that ended, by type and outcome (succeeded, retry, failed, given_back, worker_lost, expired), as the broker and the sweeper judged them.",
		}, []string{"type", "outcome"}),
		AttemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jobgate_attempt_duration_seconds",
			Help:    "Duration of the attempts counted by jobgate_attempts_total, from the claim to the verdict (the attempt's history entry).",
			Buckets: AttemptBuckets,
		}, []string{"type", "outcome"}),
		TenantOldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "jobgate_tenant_oldest_queued_seconds",
			Help: "Age of each tenant's oldest queued job (same tenants as jobgate_tenant_queued_jobs; \"other\" is the oldest of the rest).",
		}, []string{"tenant"}),
	}
	newScheduleMetrics(m)
	newFlowMetrics(m)
	m.Registry.MustRegister(
		m.ScheduledDepth, m.ScheduleLate, m.FlowBlocked, m.FlowPlaces, m.FlowInUse, m.FlowWaiting,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.Admissions, m.AdmissionDuration, m.LongPolls, m.RelayPublished,
		m.RelayBacklog, m.JobsByState, m.Stalled, m.RenderDuration, m.RenderAttempts,
		m.TenantQueued, m.TenantOldest, m.StorageBytes, m.StorageBudget,
		m.Attempts, m.AttemptDuration,
		m.TenantResultQuota, m.TenantsAtResultQuota, m.TenantResultBytes, m.TenantResultsQuotaFull,
	)
	return m
}

// Deliveries are the notifier's counts: events handled to the end and
// notice deliveries by channel and outcome. They are the notifier's only
// count, read back by its Stats and exported as jobgate_notice_events_total
// and jobgate_deliveries_total once registered. Each notifier has its own
// (tests run several in one process).
type Deliveries struct {
	Events prometheus.Counter
	byKind *prometheus.CounterVec
}

// NewDeliveries creates the counters, not yet registered anywhere.
func NewDeliveries() *Deliveries {
	return &Deliveries{
		Events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobgate_notice_events_total", Help: "Job events the notifier handled to the end.",
		}),
		byKind: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobgate_deliveries_total", Help: "Notice deliveries by channel and outcome.",
		}, []string{"channel", "outcome"}),
	}
}

// Counter is the count of one channel (webhook, mail) and outcome.
func (d *Deliveries) Counter(channel, outcome string) prometheus.Counter {
	return d.byKind.WithLabelValues(channel, outcome)
}

// RegisterDeliveries exports d from this registry.
func (m *Metrics) RegisterDeliveries(d *Deliveries) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(d.Events, d.byKind)
}

// Value reads a counter (or gauge): for a component's own statistics.
func Value(c prometheus.Metric) float64 {
	var out dto.Metric
	if err := c.Write(&out); err != nil {
		return 0
	}
	if out.Counter != nil {
		return out.Counter.GetValue()
	}
	return out.Gauge.GetValue()
}

// ObserveSSE exports jobgate_sse_connections from open, read at scrape
// time, so the gateway's own count is the only one kept.
func (m *Metrics) ObserveSSE(open func() int64) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "jobgate_sse_connections", Help: "Open Server-Sent Events streams.",
	}, func() float64 { return float64(open()) }))
}

// TopN is how many tenants or destinations a per-tenant or per-destination
// metric names; the rest are summed under the label value "other", so a
// deployment with thousands of tenants exports a bounded number of series.
const TopN = 20

// Other is the label value of everything past the TopN.
const Other = "other"

// PendingDeliveries is the backlog of one notice destination (a webhook
// endpoint, or one tenant's mail).
type PendingDeliveries struct {
	Tenant      string
	Destination string // an opaque id: a webhook URL may carry a token
	Channel     string // webhook, mail
	Count       float64
}

// ObservePendingDeliveries exports jobgate_deliveries_pending from read, at
// scrape time: the TopN destinations with the largest backlogs by name, the
// others summed per channel under tenant and destination "other".
func (m *Metrics) ObservePendingDeliveries(read func() []PendingDeliveries) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(&pendingDeliveries{
		desc: prometheus.NewDesc("jobgate_deliveries_pending",
			"Notice deliveries queued and not done yet (waiting retries included), per destination; the largest "+
				"backlogs by name, the rest summed as \"other\".",
			[]string{"tenant", "destination", "channel"}, nil),
		read: read,
	})
}

type pendingDeliveries struct {
	desc *prometheus.Desc
	read func() []PendingDeliveries
}

func (p *pendingDeliveries) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }

func (p *pendingDeliveries) Collect(ch chan<- prometheus.Metric) {
	all := p.read()
	sort.SliceStable(all, func(i, j int) bool { return all[i].Count > all[j].Count })
	other := map[string]float64{}
	for i, x := range all {
		if i < TopN {
			ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, x.Count, x.Tenant, x.Destination, x.Channel)
			continue
		}
		other[x.Channel] += x.Count
	}
	for channel, n := range other {
		ch <- prometheus.MustNewConstMetric(p.desc, prometheus.GaugeValue, n, Other, Other, channel)
	}
}

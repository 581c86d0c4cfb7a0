package metrics

import (
	"sort"
	"time"
)

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

// TenantQueue is one tenant's queue as the dispatcher tracks it.
type TenantQueue struct {
	Tenant string
	Depth  int
	Oldest time.Time // when the oldest queued job was queued
}

// SetTenantQueues replaces the per-tenant queue gauges: the TopN tenants
// with the deepest queues by name, the others summed (depth) and maxed
// (age) under "other", so the series stay bounded however many tenants
// there are. A tenant whose queue emptied disappears.
func (m *Metrics) SetTenantQueues(qs []TenantQueue, now time.Time) {
	if m == nil {
		return
	}
	sort.Slice(qs, func(i, j int) bool {
		if qs[i].Depth != qs[j].Depth {
			return qs[i].Depth > qs[j].Depth
		}
		return qs[i].Tenant < qs[j].Tenant
	})
	m.TenantQueued.Reset()
	m.TenantOldest.Reset()
	var other TenantQueue
	for i, q := range qs {
		if i < TopN {
			m.TenantQueued.WithLabelValues(q.Tenant).Set(float64(q.Depth))
			m.TenantOldest.WithLabelValues(q.Tenant).Set(max(now.Sub(q.Oldest).Seconds(), 0))
			continue
		}
		other.Depth += q.Depth
		if other.Oldest.IsZero() || q.Oldest.Before(other.Oldest) {
			other.Oldest = q.Oldest
		}
	}
	if other.Depth > 0 {
		m.TenantQueued.WithLabelValues(Other).Set(float64(other.Depth))
		m.TenantOldest.WithLabelValues(Other).Set(max(now.Sub(other.Oldest).Seconds(), 0))
	}
}

// SetStorage records one resource's bytes stored and its byte budget.
func (m *Metrics) SetStorage(resource string, bytes, budget int64) {
	if m != nil {
		m.StorageBytes.WithLabelValues(resource).Set(float64(bytes))
		m.StorageBudget.WithLabelValues(resource).Set(float64(budget))
	}
}

// SetTenantResults records a reading of each tenant's stored result bytes
// (use) against the quota: the tenants at full × quota or more counted,
// and those past half of it by name, the TopN largest, the rest summed
// under "other", so the series stay bounded however many tenants there
// are. A tenant back under half disappears.
func (m *Metrics) SetTenantResults(use map[string]int64, quota int64, full float64) {
	if m == nil {
		return
	}
	type tenantBytes struct {
		tenant string
		bytes  int64
	}
	var past []tenantBytes
	atQuota := 0
	for t, n := range use {
		if float64(n) >= full*float64(quota) {
			atQuota++
		}
		if 2*n > quota {
			past = append(past, tenantBytes{t, n})
		}
	}
	sort.Slice(past, func(i, j int) bool {
		if past[i].bytes != past[j].bytes {
			return past[i].bytes > past[j].bytes
		}
		return past[i].tenant < past[j].tenant
	})
	m.TenantResultQuota.Set(float64(quota))
	m.TenantsAtResultQuota.Set(float64(atQuota))
	m.TenantResultBytes.Reset()
	var other int64
	for i, p := range past {
		if i < TopN {
			m.TenantResultBytes.WithLabelValues(p.tenant).Set(float64(p.bytes))
			continue
		}
		other += p.bytes
	}
	if other > 0 {
		m.TenantResultBytes.WithLabelValues(Other).Set(float64(other))
	}
}

// TenantResultsFull counts a refusal for a tenant's result quota at stage
// (admission, upload).
func (m *Metrics) TenantResultsFull(stage string) {
	if m != nil {
		m.TenantResultsQuotaFull.WithLabelValues(stage).Inc()
	}
}

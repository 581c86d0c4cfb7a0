package dispatcher

import (
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/metrics"
)

// tracked is what the sweeper remembers of a job that is not terminal.
type tracked struct {
	state      job.State
	typ        string
	tenant     string
	retrying   bool          // running between attempts, waiting for the next
	lastSign   time.Time     // last sign of life: heartbeat, retry due, or last change
	staleAfter time.Duration // silence after which a running job is recovered
	changed    time.Time
	created    time.Time // the retention's start: an open job is failed expired near its end
	startBy    time.Time // queued jobs: canceled deadline_exceeded when not started by then (zero: no deadline)
	lastCheck  time.Time // queued jobs: when their work message was last looked up
	suspect    uint64    // queued jobs: a delivered, unclaimed work message seen at lastCheck
}

// tracker holds the non-terminal jobs, fed by a watch of the record bucket,
// so the sweeper never scans the bucket.
type tracker struct {
	mu   sync.Mutex
	jobs map[string]*tracked
}

func newTracker() *tracker { return &tracker{jobs: make(map[string]*tracked)} }

// observe records the latest version of a job; terminal jobs are dropped,
// and so are scheduled ones: the scheduled set is stored (schedule.go), and
// a scheduled job costs the sweeper nothing until it is queued.
func (t *tracker) observe(key string, r *job.Record, staleAfter time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r == nil || r.State.Terminal() || r.State == job.StateScheduled {
		delete(t.jobs, key)
		return
	}
	prev := t.jobs[key]
	e := &tracked{state: r.State, typ: r.Type, tenant: r.Tenant, retrying: r.State == job.StateRunning && r.Worker == "" && r.RetryAt != nil, lastSign: lastSign(r), changed: r.UpdatedAt, created: r.RetentionStart(), staleAfter: staleAfter}
	if r.StartBy != nil && r.State == job.StateQueued && r.Attempt == 0 {
		e.startBy = *r.StartBy
	}
	if prev != nil {
		e.lastCheck, e.suspect = prev.lastCheck, prev.suspect
	}
	t.jobs[key] = e
}

func (t *tracker) forget(key string) {
	t.mu.Lock()
	delete(t.jobs, key)
	t.mu.Unlock()
}

// due lists the open jobs created before expireBefore (near the end of
// their retention), the running jobs silent for longer than their own
// stale limit and not looked at since then, and the queued jobs unchanged
// since before queuedBefore whose work message was not looked up since
// then. A job is in one list at most.
func (t *tracker) due(now, queuedBefore, expireBefore time.Time) (expiring, stale, queued []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.jobs {
		if !e.created.IsZero() && e.created.Before(expireBefore) {
			expiring = append(expiring, k)
			continue
		}
		switch e.state {
		case job.StateRunning:
			staleBefore := now.Add(-e.staleAfter)
			if e.lastSign.Before(staleBefore) && e.lastCheck.Before(staleBefore) {
				stale = append(stale, k)
			}
		case job.StateQueued:
			if e.changed.Before(queuedBefore) && e.lastCheck.Before(queuedBefore) {
				queued = append(queued, k)
			}
		}
	}
	return expiring, stale, queued
}

func (t *tracker) checked(key string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.jobs[key]; e != nil {
		e.lastCheck = at
	}
}

// suspect notes that the job's work message seq was delivered yet did not
// bring the job forward, and reports whether the previous check (a period
// ago) noted the same message.
func (t *tracker) suspect(key string, seq uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.jobs[key]
	if e == nil {
		return false
	}
	again := e.suspect == seq
	e.suspect = seq
	return again
}

func (t *tracker) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.jobs)
}

// lastSign is the latest sign of life of a running job: its worker's
// heartbeat, or when its next attempt is due.
func lastSign(r *job.Record) time.Time {
	s := r.UpdatedAt
	if r.HeartbeatAt != nil && r.HeartbeatAt.After(s) {
		s = *r.HeartbeatAt
	}
	if r.RetryAt != nil && r.RetryAt.After(s) {
		s = *r.RetryAt
	}
	return s
}

// byType is each type's open jobs by state and, per tenant, when its
// oldest queued job was admitted (jobgate_jobs and
// jobgate_oldest_queued_seconds).
func (t *tracker) byType() []metrics.TypeQueue {
	t.mu.Lock()
	defer t.mu.Unlock()
	by := map[string]*metrics.TypeQueue{}
	for _, e := range t.jobs {
		q := by[e.typ]
		if q == nil {
			q = &metrics.TypeQueue{Type: e.typ, Oldest: map[string]time.Time{}}
			by[e.typ] = q
		}
		switch {
		case e.state == job.StateQueued:
			q.Queued++
			if old, ok := q.Oldest[e.tenant]; !ok || e.created.Before(old) {
				q.Oldest[e.tenant] = e.created
			}
		case e.retrying:
			q.Retrying++
		default:
			q.Running++
		}
	}
	out := make([]metrics.TypeQueue, 0, len(by))
	for _, q := range by {
		out = append(out, *q)
	}
	return out
}

// queuedByTenant is each tenant's queued jobs and the time its oldest one
// was queued (for the per-tenant queue metrics).
func (t *tracker) queuedByTenant() []metrics.TenantQueue {
	t.mu.Lock()
	defer t.mu.Unlock()
	by := map[string]*metrics.TenantQueue{}
	for _, e := range t.jobs {
		if e.state != job.StateQueued {
			continue
		}
		q := by[e.tenant]
		if q == nil {
			q = &metrics.TenantQueue{Tenant: e.tenant, Oldest: e.changed}
			by[e.tenant] = q
		}
		q.Depth++
		if e.changed.Before(q.Oldest) {
			q.Oldest = e.changed
		}
	}
	out := make([]metrics.TenantQueue, 0, len(by))
	for _, q := range by {
		out = append(out, *q)
	}
	return out
}

// counts returns how many open jobs are in each state.
func (t *tracker) counts() map[job.State]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[job.State]int{job.StateQueued: 0, job.StateRunning: 0}
	for _, e := range t.jobs {
		out[e.state]++
	}
	return out
}

// missedStart lists the queued jobs whose start_by passed at now.
func (t *tracker) missedStart(now time.Time) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for k, e := range t.jobs {
		if e.state == job.StateQueued && !e.startBy.IsZero() && now.After(e.startBy) {
			out = append(out, k)
		}
	}
	return out
}

package gateway

import (
	"context"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/api"
)

// What a waiting job waits for, as the admin API tells the operator: a
// job of a type no live worker runs stays queued however long one looks at
// it, and a new operator reads that as jobgate being stuck. The job detail
// says "waiting for a worker" (waiting_for), and the stats count each
// type's live workers, so the console can flag a type with work and none.

// typeRunners is who runs each type, as the stats tell it: the live
// workers of each type, the paused types, and the endpoint types (jobgate
// runs those by calling their HTTP endpoint; no worker process announces
// them).
type typeRunners struct {
	workers  map[string]int
	paused   map[string]bool
	endpoint map[string]bool
}

func (t *typeRegistry) runners(now time.Time) typeRunners {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r := typeRunners{workers: t.liveWorkers(now), paused: map[string]bool{}, endpoint: map[string]bool{}}
	for name, d := range t.decls {
		if d.Paused {
			r.paused[name] = true
		}
		if d.Endpoint != nil {
			r.endpoint[name] = true
		}
	}
	return r
}

// waitingFor is what rec waits for: api.WaitingForResume when its type is
// paused, api.WaitingForWorker when no live worker runs its type, "" when
// it runs, is done, or a worker (or, for an endpoint type, jobgate's
// endpoint caller) is there to take it. A job waits when it is queued or
// running between attempts (no worker holds it).
func (g *Gateway) waitingFor(rec *job.Record) string { return g.waitingForMemo(rec, nil) }

// waitingForMemo is waitingFor with the state of each flow key read once
// per memo (a listing's: its jobs share their keys).
func (g *Gateway) waitingForMemo(rec *job.Record, memo map[string]string) string {
	if rec.State != job.StateQueued && (rec.State != job.StateRunning || rec.Worker != "") {
		return ""
	}
	info, ok := g.types.info(rec.Type, g.cfg.Now())
	switch {
	case ok && info.Paused:
		return api.WaitingForResume
	case ok && info.TypeDecl.Endpoint != nil:
		return g.flowWaiting(info.TypeDecl, rec, memo) // jobgate's endpoint caller runs it
	case info.Workers == 0:
		// Also a type gone from the table: nothing runs its jobs.
		return api.WaitingForWorker
	}
	if ok {
		return g.flowWaiting(info.TypeDecl, rec, memo)
	}
	return ""
}

// flowSlots reads the types' flow control state (natsjs.SlotStore).
type flowSlots interface {
	Leased(ctx context.Context, key string, now time.Time) (int, error)
	Tokens(ctx context.Context, key string, perSecond float64, burst int, now time.Time) (float64, error)
	// Waiting is the dispatchers' flow census: the jobs each type's flow
	// control holds back, by tenant.
	Waiting(ctx context.Context) (natsjs.FlowWaiting, error)
}

// flowWaitBudget bounds the reads of what a job waits for: the detail is
// answered without it rather than late.
const flowWaitBudget = 500 * time.Millisecond

// flowWaiting is api.WaitingForConcurrency when one of the job's
// concurrency keys is at its limit now, api.WaitingForRateLimit when its
// rate bucket is empty, "" otherwise (or when the state cannot be read):
// the broker parks such a job until its key frees (internal/broker). With
// a memo, each key is read once per memo.
func (g *Gateway) flowWaiting(d *job.TypeDecl, rec *job.Record, memo map[string]string) string {
	keys := job.FlowKeys(d, rec)
	if len(keys) == 0 || g.slots == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), flowWaitBudget)
	defer cancel()
	now := g.cfg.Now()
	for _, k := range keys {
		why, known := memo[k.Key]
		if !known {
			why = g.keyWaiting(ctx, k, now)
			if memo != nil {
				memo[k.Key] = why
			}
		}
		if why != "" {
			return why
		}
	}
	return ""
}

// keyWaiting is what a job waits for under k at now: its rate bucket
// empty, its concurrency key at its limit, or "".
func (g *Gateway) keyWaiting(ctx context.Context, k job.FlowKey, now time.Time) string {
	if k.Rate != nil {
		if t, err := g.slots.Tokens(ctx, k.Key, k.Rate.PerSecond, k.Rate.BurstOr(), now); err == nil && t < 1 {
			return api.WaitingForRateLimit
		}
		return ""
	}
	if n, err := g.slots.Leased(ctx, k.Key, now); err == nil && n >= k.Limit {
		return api.WaitingForConcurrency
	}
	return ""
}

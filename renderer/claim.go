package renderer

import (
	"context"
	"errors"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/job"
	"github.com/nats-io/nats.go/jetstream"
)

// opTimeout bounds one store operation outside a render.
const opTimeout = 10 * time.Second

// retrySlack: a retry that is due within this long is started now.
const retrySlack = 250 * time.Millisecond

type verdict int

const (
	verdictRender  verdict = iota // claimed: render it
	verdictAck                    // nothing to do for this message
	verdictNak                    // try this message again after delay
	verdictExhaust                // no attempts left: fail the job
)

// claimResult is what claim decided about one delivery.
type claimResult struct {
	verdict verdict
	why     string
	delay   time.Duration
	prev    *job.Record // the record as found
	rec     *job.Record // the record as claimed (verdictRender)
}

// claim decides what a delivery means for its job and, when the job is
// free to run, claims it by compare-and-set: queued (or running between
// attempts, or running with a worker whose heartbeat went stale) becomes
// running under this worker with attempt+1. Of any number of renderers
// holding a message for the same job, exactly one wins.
func (r *Renderer) claim(ctx context.Context, key string, md *jetstream.MsgMetadata) claimResult {
	for range 10 {
		cur, err := r.res.Jobs.Get(ctx, key)
		if errors.Is(err, job.ErrNotFound) {
			return claimResult{verdict: verdictAck, why: "job record gone"}
		}
		if err != nil {
			return claimResult{verdict: verdictNak, why: err.Error(), delay: r.cfg.AckWait / 3}
		}
		now := r.cfg.Now().UTC()
		switch {
		case cur.State.Terminal():
			return claimResult{verdict: verdictAck, why: "job already " + string(cur.State), prev: cur}
		case cur.State == job.StateRunning && cur.Worker != "" && now.Sub(heartbeat(cur)) < r.cfg.StaleAfter:
			return claimResult{verdict: verdictAck, why: "job running on " + cur.Worker, prev: cur}
		case cur.State == job.StateRunning && cur.Worker == "" && cur.RetryAt != nil && cur.RetryAt.Sub(now) > retrySlack:
			return claimResult{verdict: verdictNak, why: "retry not due yet", delay: cur.RetryAt.Sub(now), prev: cur}
		case cur.Attempt >= r.cfg.MaxAttempts:
			return claimResult{verdict: verdictExhaust, why: "no attempts left", prev: cur}
		}
		next := cur.Clone()
		if err := next.Transition(job.StateRunning, now); err != nil {
			return claimResult{verdict: verdictAck, why: err.Error(), prev: cur}
		}
		if cur.State == job.StateRunning && cur.Worker != "" {
			// The previous attempt's worker vanished without a verdict.
			next.Error = job.WorkerLost(cur)
		}
		total := pagesOf(cur)
		next.Attempt++
		next.Worker = r.cfg.Worker
		next.HeartbeatAt = &now
		next.RetryAt = nil
		next.Progress = &job.Progress{Done: 0, Total: total, Unit: "pages"}
		err = r.res.Jobs.Update(ctx, next)
		if errors.Is(err, natsjs.ErrStale) {
			continue
		}
		if err != nil {
			return claimResult{verdict: verdictNak, why: err.Error(), delay: r.cfg.AckWait / 3, prev: cur}
		}
		return claimResult{verdict: verdictRender, prev: cur, rec: next}
	}
	return claimResult{verdict: verdictNak, why: "record kept changing", delay: time.Second}
}

// heartbeat is the last sign of life of a running record's worker.
func heartbeat(r *job.Record) time.Time {
	if r.HeartbeatAt != nil {
		return *r.HeartbeatAt
	}
	return r.UpdatedAt
}

// pagesOf reads the page count of a permit report's params; 0 when absent.
func pagesOf(r *job.Record) int {
	p, err := decodeParams(r.Params)
	if err != nil {
		return 0
	}
	return p.Pages
}

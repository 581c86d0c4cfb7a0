package worker

import (
	"context"
	"errors"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/retry"
	"github.com/jobgate/jobgate/pkg/job"
)

// retrySlack: a retry that is due within this long is started now.
const retrySlack = 250 * time.Millisecond

type verdict int

const (
	verdictRun     verdict = iota // claimed: run it
	verdictAck                    // nothing to do for this message
	verdictNak                    // try this message again after delay
	verdictExhaust                // no attempts left: fail the job
	verdictTerm                   // a message this type can never run
)

// claimResult is what claim decided about one delivery.
type claimResult struct {
	verdict verdict
	why     string
	delay   time.Duration
	rec     *job.Record // the record as claimed (verdictRun)
}

// claim decides what a delivery means for its job and, when the job is free
// to run, claims it by compare-and-set. Of any number of workers holding a
// message for the same job, exactly one wins. A delivery that ends without
// a claim costs the job no attempt: attempts are counted by claims only.
func (w *Workers) claim(ctx context.Context, t *typeRunner, key string, delivered uint64) claimResult {
	for range 10 {
		cur, err := w.res.Jobs.Get(ctx, key)
		if errors.Is(err, job.ErrNotFound) {
			return claimResult{verdict: verdictAck, why: "job record gone"}
		}
		if err != nil {
			// The store is unreachable: come back later, later each time,
			// jittered, so an outage of any length only delays the job.
			return claimResult{verdict: verdictNak, why: err.Error(), delay: outageDelay(delivered)}
		}
		now := w.cfg.Now().UTC()
		maxAttempts := cur.AttemptsOr(t.decl.Attempts)
		switch {
		case cur.Type != t.decl.Name:
			return claimResult{verdict: verdictTerm, why: "job of type " + cur.Type + " on the queue of " + t.decl.Name}
		case cur.State.Terminal():
			return claimResult{verdict: verdictAck, why: "job already " + string(cur.State)}
		case cur.State == job.StateRunning && cur.Worker == w.cfg.Name && !w.runs(key):
			// This worker's claim, stored, whose answer was lost (a node
			// stopped): the job is ours to run, at the attempt it claimed.
			return claimResult{verdict: verdictRun, rec: cur}
		case cur.State == job.StateRunning && cur.Worker != "" && now.Sub(cur.LastSign()) < w.cfg.StaleAfter:
			if cur.Worker == w.cfg.Name {
				return claimResult{verdict: verdictAck, why: "job running here"}
			}
			// Another worker holds it. If that worker is gone, this may be
			// the job's only work message: come back once its claim is
			// stale and take it over, rather than leave it to the
			// dispatcher's much longer limit.
			return claimResult{verdict: verdictNak, why: "job running on " + cur.Worker,
				delay: w.cfg.StaleAfter - now.Sub(cur.LastSign()) + jitter(retrySlack)}
		case cur.State == job.StateRunning && cur.Worker == "" && cur.RetryAt != nil && cur.RetryAt.Sub(now) > retrySlack:
			return claimResult{verdict: verdictNak, why: "retry not due yet", delay: cur.RetryAt.Sub(now)}
		case cur.AttemptsUsed() >= maxAttempts:
			return claimResult{verdict: verdictExhaust, why: "no attempts left"}
		}
		next := cur.Clone()
		if err := next.Claim(w.cfg.Name, now); err != nil {
			return claimResult{verdict: verdictAck, why: err.Error()}
		}
		err = w.res.Jobs.Update(ctx, next)
		if errors.Is(err, natsjs.ErrStale) {
			continue
		}
		if err != nil {
			// The write may have been stored with its answer lost: a
			// record that shows this claim is ours (and if it cannot be
			// read now, the next delivery finds it, above).
			if got, gerr := w.res.Jobs.Get(ctx, key); gerr == nil && got.State == job.StateRunning &&
				got.Worker == w.cfg.Name && got.Attempt == next.Attempt && !w.runs(key) {
				return claimResult{verdict: verdictRun, rec: got}
			}
			return claimResult{verdict: verdictNak, why: err.Error(), delay: outageDelay(delivered)}
		}
		return claimResult{verdict: verdictRun, rec: next}
	}
	return claimResult{verdict: verdictNak, why: "record kept changing", delay: jitter(time.Second)}
}

// outageDelay is how long a delivery that could not reach the record store
// waits before it comes back: 1s, doubling per delivery, at most 30s,
// jittered.
func outageDelay(delivered uint64) time.Duration {
	return jitter(retry.Exponential(time.Second, 30*time.Second, int(min(max(delivered, 1)-1, 40))))
}

// exhaust fails a job whose attempts ran out without a verdict on the last
// one (its worker vanished, or it was given back).
func (w *Workers) exhaust(ctx context.Context, t *typeRunner, msg *natsjs.WorkMsg) {
	now := w.cfg.Now().UTC()
	rec, err := w.res.Jobs.Mutate(ctx, msg.Key, func(n *job.Record) error {
		maxAttempts := n.AttemptsOr(t.decl.Attempts)
		if n.State.Terminal() || n.AttemptsUsed() < maxAttempts {
			return errLost
		}
		if n.State == job.StateRunning && n.Worker != "" && now.Sub(n.LastSign()) < w.cfg.StaleAfter {
			return errLost
		}
		return n.Fail(job.FinalFailure(n, maxAttempts), now)
	})
	switch {
	case errors.Is(err, errLost) || errors.Is(err, job.ErrNotFound):
		_ = msg.Ack()
	case err != nil:
		_ = msg.Nak(outageDelay(msg.Delivered))
	default:
		w.log.Info("job failed, attempts used up", "job_id", rec.ID, "attempt", rec.Attempt, "category", rec.Error.Category)
		w.publishEvent(rec, 0)
		_ = msg.Ack()
	}
}

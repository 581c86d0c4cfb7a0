package broker

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/retry"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/job"
)

// retrySlack: a retry that is due within this long is started now.
const retrySlack = 250 * time.Millisecond

// next holds a worker's request until the scheduler hands it the work of
// the tenant (and requester) whose turn it is, claims that job for the
// worker by compare-and-set and answers the claim. The work message stays
// in the queue, due again after StaleAfter: its next delivery checks on the
// claim (and takes the job over if the claim went silent), so a worker that
// vanishes with a job costs a bounded wait, and a tenant's cap counts the
// job while it runs.
func (b *Broker) next(ctx context.Context, r *request) *wire.Reply {
	var req wire.NextRequest
	if bad := r.decode(&req); bad != nil {
		return bad
	}
	if !wire.ValidWorkerName(req.Worker) || req.WaitMS < 0 || len(req.Running) > wire.MaxRunningTenants {
		return refuse(wire.CodeBadRequest, "worker must match [A-Za-z0-9_.:@-]{1,128}, wait be positive, at most %d running tenants", wire.MaxRunningTenants)
	}
	d, bad := b.decl(ctx, r.cred, r.typ)
	if bad != nil {
		return bad
	}
	release, fits := b.wait(r.cred)
	if !fits {
		return refuse(wire.CodeThrottled, "too many next requests of this credential held at once")
	}
	defer release()
	q, err := b.queue(ctx, r.typ)
	if err != nil {
		return refuse(wire.CodeUnavailable, "the work queue could not be opened")
	}
	// The reply must reach the worker before its request times out: keep
	// a second of the wait back.
	wait := min(time.Duration(req.WaitMS)*time.Millisecond, wire.MaxWait)
	wctx, cancel := context.WithTimeout(ctx, max(wait-time.Second, 100*time.Millisecond))
	defer cancel()
	for wctx.Err() == nil {
		var msg *natsjs.WorkMsg
		if req.Newcomer {
			msg, err = q.NextNewcomer(wctx, func(tenant string) bool { return !slices.Contains(req.Running, tenant) })
		} else {
			msg, err = q.Next(wctx)
		}
		if err != nil {
			if wctx.Err() != nil {
				break
			}
			b.log.Warn("pull failed", "type", r.typ, "err", err)
			return refuse(wire.CodeUnavailable, "the work queue could not be read")
		}
		if msg == nil {
			continue
		}
		if a := b.handle(ctx, d, msg, req.Worker); a != nil {
			return &wire.Reply{Job: a}
		}
	}
	return ok
}

// handle settles one delivery: a claim (its assignment), or what the
// delivery means otherwise (nil).
func (b *Broker) handle(ctx context.Context, d *job.TypeDecl, msg *natsjs.WorkMsg, worker string) *wire.Assignment {
	if msg.Key == "" {
		b.log.Warn("work message names no job", "type", d.Name)
		_ = msg.Term("not a job")
		return nil
	}
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	c := b.claim(octx, d, msg.Key, msg.Delivered, worker)
	switch c.verdict {
	case verdictAck:
		_ = msg.Ack()
		return nil
	case verdictNak:
		_ = msg.Nak(c.delay)
		return nil
	case verdictTerm:
		b.log.Warn("work dropped", "key", msg.Key, "why", c.why)
		_ = msg.Term(c.why)
		return nil
	case verdictExhaust:
		b.exhaust(octx, d, msg)
		return nil
	}
	_ = msg.Nak(b.cfg.StaleAfter + jitter(retrySlack))
	rec := c.rec
	b.event(rec)
	b.log.Info("job claimed", "job_id", rec.ID, "type", rec.Type, "attempt", rec.Attempt, "worker", worker, "delivery", msg.Delivered)
	return &wire.Assignment{
		Key: rec.Key(), ID: rec.ID, Type: rec.Type, Tenant: rec.Tenant, Requester: rec.Requester,
		Attempt: rec.Attempt, Attempts: rec.AttemptsOr(d.Attempts), CreatedAt: rec.CreatedAt, Params: rec.Params,
		Token: b.token(rec.Key(), rec.Attempt), TimeoutMS: rec.TimeoutOr(d.Timeout()).Milliseconds(),
		BeatMS: b.cfg.BeatInterval.Milliseconds(), MaxResultBytes: d.MaxResultBytes,
	}
}

type verdict int

const (
	verdictRun     verdict = iota // claimed: run it
	verdictAck                    // nothing to do for this message
	verdictNak                    // try this message again after delay
	verdictExhaust                // no attempts left: fail the job
	verdictTerm                   // a message this type can never run
)

type claimResult struct {
	verdict verdict
	why     string
	delay   time.Duration
	rec     *job.Record
}

// claim decides what a delivery means for its job and, when the job is free
// to run, claims it for worker by compare-and-set. Of any number of brokers
// holding a delivery of the same job, exactly one wins. A delivery that ends
// without a claim costs the job no attempt: attempts are counted by claims.
func (b *Broker) claim(ctx context.Context, d *job.TypeDecl, key string, delivered uint64, worker string) claimResult {
	for range 10 {
		cur, err := b.res.Jobs.Get(ctx, key)
		if errors.Is(err, job.ErrNotFound) {
			return claimResult{verdict: verdictAck, why: "job record gone"}
		}
		if err != nil {
			// The store is unreachable: come back later, later each time,
			// jittered, so an outage of any length only delays the job.
			return claimResult{verdict: verdictNak, why: err.Error(), delay: outageDelay(delivered)}
		}
		now := b.cfg.Now().UTC()
		maxAttempts := cur.AttemptsOr(d.Attempts)
		switch {
		case cur.Type != d.Name:
			return claimResult{verdict: verdictTerm, why: "job of type " + cur.Type + " on the queue of " + d.Name}
		case cur.State.Terminal():
			return claimResult{verdict: verdictAck, why: "job already " + string(cur.State)}
		case cur.State == job.StateRunning && cur.Worker != "" && now.Sub(cur.LastSign()) < b.cfg.StaleAfter:
			// A live claim: check on it again once it could have gone
			// stale.
			return claimResult{verdict: verdictNak, why: "job running on " + cur.Worker,
				delay: b.cfg.StaleAfter - now.Sub(cur.LastSign()) + jitter(retrySlack)}
		case cur.State == job.StateRunning && cur.Worker == "" && cur.RetryAt != nil && cur.RetryAt.Sub(now) > retrySlack:
			return claimResult{verdict: verdictNak, why: "retry not due yet", delay: cur.RetryAt.Sub(now)}
		case cur.AttemptsUsed() >= maxAttempts:
			return claimResult{verdict: verdictExhaust, why: "no attempts left"}
		}
		next := cur.Clone()
		if err := next.Claim(worker, now); err != nil {
			return claimResult{verdict: verdictAck, why: err.Error()}
		}
		if b.beforeClaimWrite != nil {
			b.beforeClaimWrite(key)
		}
		err = b.res.Jobs.Update(ctx, next)
		if errors.Is(err, natsjs.ErrStale) {
			continue
		}
		if err != nil {
			// The claim may be stored with its answer lost; then it goes
			// silent and the next delivery takes it over.
			return claimResult{verdict: verdictNak, why: err.Error(), delay: outageDelay(delivered)}
		}
		return claimResult{verdict: verdictRun, rec: next}
	}
	return claimResult{verdict: verdictNak, why: "record kept changing", delay: jitter(time.Second)}
}

// exhaust fails a job whose attempts ran out without a verdict on the last
// one (its worker vanished, or it was given back).
func (b *Broker) exhaust(ctx context.Context, d *job.TypeDecl, msg *natsjs.WorkMsg) {
	now := b.cfg.Now().UTC()
	rec, err := b.res.Jobs.Mutate(ctx, msg.Key, func(n *job.Record) error {
		maxAttempts := n.AttemptsOr(d.Attempts)
		if n.State.Terminal() || n.AttemptsUsed() < maxAttempts {
			return errSkip
		}
		if n.State == job.StateRunning && n.Worker != "" && now.Sub(n.LastSign()) < b.cfg.StaleAfter {
			return errSkip
		}
		return n.Fail(job.FinalFailure(n, maxAttempts), now)
	})
	switch {
	case errors.Is(err, errSkip) || errors.Is(err, job.ErrNotFound):
		_ = msg.Ack()
	case err != nil:
		_ = msg.Nak(outageDelay(msg.Delivered))
	default:
		b.log.Info("job failed, attempts used up", "job_id", rec.ID, "attempt", rec.Attempt, "category", rec.Error.Category)
		b.observe(d.Name, "failed")
		b.event(rec)
		_ = msg.Ack()
	}
}

var errSkip = errors.New("nothing to do")

// outageDelay is how long a delivery that could not reach the record store
// waits before it comes back: 1s, doubling per delivery, at most 30s,
// jittered.
func outageDelay(delivered uint64) time.Duration {
	return jitter(retry.Exponential(time.Second, 30*time.Second, int(min(max(delivered, 1)-1, 40))))
}

// jitter spreads d by ±20%.
func jitter(d time.Duration) time.Duration {
	return max(retry.Spread(d, 0.2, rand.Float64), 0)
}

// tenantOf is the tenant of a record key.
func tenantOf(key string) string {
	t, _, _ := strings.Cut(key, ".")
	return t
}

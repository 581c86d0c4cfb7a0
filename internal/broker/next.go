package broker

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/retry"
	"github.com/jobgate/jobgate/internal/tracing"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/api"
	"go.opentelemetry.io/otel/trace"
)

// retrySlack: a retry that is due within this long is started now.
const retrySlack = 250 * time.Millisecond

// next holds a worker's request until the type's scheduler hands it the
// work of the tenant (and requester) whose turn it is, claims that job for
// the worker by compare-and-set and answers the claim. The work message
// stays in the stream: this broker looks at it again once the claim could
// have gone stale (and takes the job over if it did), and removes it once
// the job has ended.
func (b *Broker) next(ctx context.Context, r *request) *wire.Reply {
	var req wire.NextRequest
	if bad := r.decode(&req); bad != nil {
		return bad
	}
	if bad := checkNext(&req); bad != nil {
		return bad
	}
	d, bad := b.decl(ctx, r.cred, r.typ)
	if bad != nil {
		return bad
	}
	// The reply must reach the worker before its request times out: keep
	// a second of the wait back.
	wait := min(time.Duration(req.WaitMS)*time.Millisecond, wire.MaxWait)
	// The worker gives up on its next request wait_ms + 5 s after sending
	// it (docs/protocol.md): a claim made later would be answered to no one.
	replyBy := r.since(b.cfg.Now()).Add(time.Duration(req.WaitMS)*time.Millisecond + nextPatience - replyMargin)
	return b.take(ctx, r, d, &req, max(wait-time.Second, 100*time.Millisecond), replyBy)
}

// How long past its wait a worker waits for the answer to a next request
// (the protocol's rule), and how much of that the broker keeps back for the
// answer's way to the worker.
const (
	nextPatience = 5 * time.Second
	replyMargin  = 500 * time.Millisecond
)

// checkNext bounds a next request's fields. A wait past MaxWait is
// refused rather than cut short: its asker would time its request out on
// the wait it sent, and the schema (docs/protocol) says 0 to 10,000.
func checkNext(req *wire.NextRequest) *wire.Reply {
	if !wire.ValidWorkerName(req.Worker) || req.WaitMS < 0 || req.WaitMS > wire.MaxWait.Milliseconds() || len(req.Running) > wire.MaxRunningTenants {
		return refuse(wire.CodeBadRequest, "worker must match [A-Za-z0-9_.:@-]{1,128}, wait_ms be 0 to %d, at most %d running tenants",
			wire.MaxWait.Milliseconds(), wire.MaxRunningTenants)
	}
	return nil
}

// quickPasses bounds the picks of a take that may not wait.
const quickPasses = 16

// take claims for req's worker the next job of d whose turn it is, waiting
// up to wait for one (0: only a job ready now), and answers it; ok with no
// job when none came.
//
// A claim made after replyBy is not answered: its asker has given up, and
// the claim would stand with no worker until it went stale, costing the
// job an attempt. It is remembered as lost instead (lost.go), and the job
// looked at again shortly, so the next worker that asks gets it as the
// same attempt.
func (b *Broker) take(ctx context.Context, r *request, d *job.TypeDecl, req *wire.NextRequest, wait time.Duration, replyBy time.Time) *wire.Reply {
	release, fits := b.wait(r.cred)
	if !fits {
		return refuse(wire.CodeThrottled, "too many next requests of this credential held at once")
	}
	defer release()
	s, err := b.sched(ctx, r.typ)
	if err != nil {
		return refuse(wire.CodeUnavailable, "the work of %s could not be read", r.typ)
	}
	var allow func(string) bool
	if req.Newcomer {
		allow = func(tenant string) bool { return !slices.Contains(req.Running, tenant) }
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// One pass at least; with no wait, a few more while the picks find
	// messages that lead to no claim (an empty lane, a live claim); one
	// more when news chose this request as its wait ended, which it would
	// otherwise leave untaken.
	again, woken := false, false
	for pass := 0; pass == 0 || wctx.Err() == nil || woken || wait == 0 && again && pass < quickPasses; pass++ {
		chosen := woken
		again, woken = false, false
		// A pause (pause.go) holds the request without a pick: nothing of
		// the type starts, and a resume wakes it.
		var bad *wire.Reply
		if d, bad = b.current(ctx, r.cred, r.typ, d); bad != nil {
			return bad
		}
		if d.Paused {
			if wait > 0 {
				s.idle(wctx)
			}
			continue
		}
		if err := s.list(wctx, false); err != nil && wctx.Err() == nil {
			b.log.Warn("work not listed", "type", r.typ, "err", err)
		}
		gen := s.generation()
		now := b.cfg.Now()
		t, l, seq := s.pick(now, allow)
		if t == nil {
			if wait > 0 && wctx.Err() == nil {
				woken = s.wait(wctx, now, gen, allow)
			}
			continue
		}
		if seq != 0 && s.stillParked(l, seq, now) {
			s.unreserve(t.name)
			again = true
			continue
		}
		// A picked message is settled whatever the wait has left: a
		// deferred one dropped here would never be looked at again.
		rctx, rcancel := context.WithTimeout(ctx, opTimeout)
		msg, err := s.read(rctx, t, l, seq)
		rcancel()
		if err != nil || msg == nil {
			s.unreserve(t.name)
		}
		if err != nil {
			if seq != 0 {
				s.later(&natsjs.LaneMsg{Seq: seq, Tenant: t.name, Requester: l.requester}, now.Add(outageDelay(1)))
			}
			if ctx.Err() != nil {
				break
			}
			b.log.Warn("work not read", "type", r.typ, "err", err)
			return refuse(wire.CodeUnavailable, "the work of %s could not be read", r.typ)
		}
		if chosen && msg != nil {
			// Chosen by news, it has taken work: the next waiting request
			// looks, should the news be one of a burst.
			s.passOn(b.cfg.Now())
		}
		if msg == nil {
			// The lane was empty, or the deferred message is gone (its job
			// ended on another broker): should it have been parked, the
			// next one parked on its key is woken in its stead.
			if key := s.unparkSeq(seq); seq != 0 && key != "" {
				s.unpark(key)
			}
			again = true
			continue
		}
		if seq == 0 && s.stillParked(l, msg.Seq, now) {
			// Read again from the lane's start (a listing found it with
			// work): a parked job whose probe lives waits on unread.
			s.settled(msg)
			s.unreserve(t.name)
			again = true
			continue
		}
		a := b.handle(ctx, s, d, msg, req.Worker, seq == 0)
		if seq == 0 {
			s.settled(msg)
		}
		if a == nil {
			s.unreserve(t.name)
			again = true
			continue
		}
		if now := b.cfg.Now(); now.After(replyBy) {
			b.unanswered(s, msg, now)
			return ok
		}
		return &wire.Reply{Job: a}
	}
	return ok
}

// sched returns the type's scheduler, starting it on first use.
func (b *Broker) sched(ctx context.Context, typ string) (*sched, error) {
	b.mu.Lock()
	s := b.scheds[typ]
	b.mu.Unlock()
	if s != nil {
		return s, nil
	}
	b.schedMu.Lock()
	defer b.schedMu.Unlock()
	b.mu.Lock()
	s = b.scheds[typ]
	b.mu.Unlock()
	if s != nil {
		return s, nil
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := b.watchTypes(octx); err != nil {
		return nil, err
	}
	s = newSched(b, typ)
	if err := s.start(octx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx.Err() != nil {
		s.close()
		return nil, errors.New("broker stopping")
	}
	b.scheds[typ] = s
	return s, nil
}

// handle settles one work message: a claim (its assignment), or what the
// message means otherwise (nil): looked at again later, or removed. fresh:
// the message was read from its lane's cursor, not looked at again, so the
// record it holds is worth trying without a read.
func (b *Broker) handle(ctx context.Context, s *sched, d *job.TypeDecl, msg *natsjs.LaneMsg, worker string, fresh bool) *wire.Assignment {
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	if msg.Key == "" {
		b.log.Warn("work message names no job", "type", d.Name, "seq", msg.Seq)
		b.remove(octx, s, msg)
		return nil
	}
	// A parked message looked at: should it not wait on its key again
	// (its job ended, or started), the next one parked there is woken, or
	// the key's waiting jobs would wait for the backstop.
	if key := s.unparkSeq(msg.Seq); key != "" {
		defer func() {
			if s.parkedOn(msg.Seq) == "" {
				s.unpark(key)
			}
		}()
	}
	var known *job.Record
	if fresh && msg.Rec != nil && msg.Rec.Key() == msg.Key && msg.Rec.Attempt == 0 && msg.Rec.State == job.StateQueued {
		known = msg.Rec
	}
	c := b.claimFrom(octx, d, msg.Key, known, 1, worker)
	now := b.cfg.Now()
	switch c.verdict {
	case verdictAck:
		b.remove(octx, s, msg)
		return nil
	case verdictNak:
		if c.block != nil {
			prio := job.DefaultPriority
			if c.rec != nil {
				prio = c.rec.PriorityOr()
			}
			s.park(msg, prio, c.block.key, c.block.delay, now)
			return nil
		}
		s.later(msg, now.Add(c.delay))
		return nil
	case verdictTerm:
		b.log.Warn("work dropped", "key", msg.Key, "why", c.why)
		b.remove(octx, s, msg)
		return nil
	case verdictExhaust:
		if b.exhaust(octx, d, msg.Key) {
			b.remove(octx, s, msg)
		} else {
			s.later(msg, now.Add(outageDelay(1)))
		}
		return nil
	}
	s.later(msg, now.Add(b.cfg.StaleAfter+jitter(retrySlack)))
	rec := c.rec
	for _, k := range c.keys {
		s.unpark(k.Key) // the next job waiting on the key may pass too
	}
	// The work names the admission's event: the claim's follows it
	// without a lookup, but only the first claim's. After a retry or a
	// takeover that event is stale, and a publish against it, refused by
	// JetStream, would still reach plain NATS subscribers of the job's
	// subject: one change announced twice.
	var after uint64
	if c.first {
		after = msg.Event
	}
	s.hold(msg, rec, b.eventAfter(rec, after))
	// The attempt's span context: its worker's handler is its child; the
	// span itself is recorded at the verdict (traceAttempt).
	asc := tracing.AttemptContext(rec.Trace, rec.TraceState, rec.Key(), rec.Attempt)
	tctx := trace.ContextWithRemoteSpanContext(ctx, asc)
	// At debug: the attempt's outcome is logged at info with its worker,
	// and one line a job is what an operator reads at thousands a second.
	b.log.DebugContext(tctx, "job claimed", "job_id", rec.ID, "type", rec.Type, "attempt", rec.Attempt, "worker", worker)
	tp, ts := tracing.Inject(tctx)
	// The attempt is its worker's for sure for the lease: its claim was
	// signed at the claim, its places (if any) held until c.placesUntil.
	lease := b.leaseLeft(rec.LastSign(), c.placesUntil, b.cfg.Now())
	return &wire.Assignment{TraceParent: tp, TraceState: ts, LeaseMS: lease.Milliseconds(),
		Key: rec.Key(), ID: rec.ID, Type: rec.Type, Tenant: rec.Tenant, Requester: rec.Requester,
		Attempt: rec.Attempt, Attempts: rec.AttemptsOr(d.Attempts), CreatedAt: rec.CreatedAt, Params: rec.Params,
		Token: b.token(rec.Key(), rec.Attempt), TimeoutMS: rec.TimeoutOr(d.Timeout()).Milliseconds(),
		BeatMS: b.cfg.BeatInterval.Milliseconds(), MaxResultBytes: d.MaxResultBytes,
	}
}

// remove deletes a work message its job needs no more, and ends this
// broker's hold of the job (a tenant's cap counts it no longer).
func (b *Broker) remove(ctx context.Context, s *sched, msg *natsjs.LaneMsg) {
	if err := s.lanes.Remove(ctx, msg.Seq); err != nil {
		b.log.Debug("work message not removed, looked at again later", "seq", msg.Seq, "err", err)
		s.later(msg, b.cfg.Now().Add(outageDelay(1)))
		return
	}
	if msg.Key != "" {
		s.finish(msg.Key)
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
	// first: the job had never been claimed, so the newest event it has is
	// its admission's, the one its work message names.
	first bool
	// block: the start waits for a flow key (delay is block.delay), and
	// rec is the job as read; keys: the flow keys a claim passed.
	block *flowBlock
	keys  []flowKey
	// placesUntil: until when the claim's concurrency places are held for
	// sure (zero: it has none).
	placesUntil time.Time
}

// placesUntil is until when a claim's places under d, placed as pl, are
// held for sure: zero without concurrency keys.
func placesUntil(d *job.TypeDecl, pl placement) time.Time {
	if len(d.Concurrency) == 0 {
		return time.Time{}
	}
	return pl.until
}

// claim decides what a delivery means for its job and, when the job is free
// to run, claims it for worker by compare-and-set. Of any number of brokers
// holding a delivery of the same job, exactly one wins. A delivery that ends
// without a claim costs the job no attempt: attempts are counted by claims.
func (b *Broker) claim(ctx context.Context, d *job.TypeDecl, key string, delivered uint64, worker string) claimResult {
	return b.claimFrom(ctx, d, key, nil, delivered, worker)
}

// claimFrom is claim starting from known, the record as its work message
// holds it, instead of a read: right for a job never claimed yet, the
// common case; a record changed since fails the compare-and-set, and the
// claim reads it then.
func (b *Broker) claimFrom(ctx context.Context, d *job.TypeDecl, key string, known *job.Record, delivered uint64, worker string) claimResult {
	for range 10 {
		cur, err, read := known, error(nil), known == nil
		if read {
			cur, err = b.stores.Jobs.Get(ctx, key)
		}
		known = nil
		if errors.Is(err, job.ErrNotFound) {
			return claimResult{verdict: verdictAck, why: "job record gone"}
		}
		if err != nil {
			// The store is unreachable: come back later, later each time,
			// jittered, so an outage of any length only delays the job.
			return claimResult{verdict: verdictNak, why: err.Error(), delay: outageDelay(delivered)}
		}
		now := b.cfg.Now().UTC()
		if read && b.ownLost(cur) { // the message's record is older than any claim
			return b.reassign(ctx, d, cur, delivered, worker, now)
		}
		maxAttempts := cur.AttemptsOr(d.Attempts)
		switch {
		case cur.Type != d.Name:
			return claimResult{verdict: verdictTerm, why: "job of type " + cur.Type + " on the queue of " + d.Name}
		case cur.State.Terminal():
			// A job that ended without its verdict reaching a broker
			// (canceled, failed by the sweeper) gives its places back here.
			b.release(ctx, d, cur)
			return claimResult{verdict: verdictAck, why: "job already " + string(cur.State)}
		case cur.State == job.StateRunning && cur.Worker != "" && now.Sub(b.signOf(cur)) < b.cfg.StaleAfter:
			// A live claim: check on it again once it could have gone
			// stale.
			return claimResult{verdict: verdictNak, why: "job running on " + cur.Worker,
				delay: b.cfg.StaleAfter - now.Sub(b.signOf(cur)) + jitter(retrySlack)}
		case cur.State == job.StateRunning && cur.Worker == "" && cur.RetryAt != nil && cur.RetryAt.Sub(now) > retrySlack:
			return claimResult{verdict: verdictNak, why: "retry not due yet", delay: cur.RetryAt.Sub(now)}
		case cur.AttemptsUsed() >= maxAttempts:
			return claimResult{verdict: verdictExhaust, why: "no attempts left"}
		case cur.MissedStart(now):
			// No attempt starts past the job's start_by: a dispatcher's
			// sweeper cancels it deadline_exceeded (dispatcher/deadline.go).
			return claimResult{verdict: verdictAck, why: "past its start_by"}
		}
		next := cur.Clone()
		if err := next.Claim(worker, now); err != nil {
			return claimResult{verdict: verdictAck, why: err.Error()}
		}
		next.ClaimID = newClaimID()
		keys := flowKeys(d, next)
		var pl placement
		if len(keys) > 0 {
			// A stale claim taken over: its places are the new one's.
			var blk *flowBlock
			if pl, blk = b.admit(ctx, d.Name, keys, cur, next, now); blk != nil {
				return claimResult{verdict: verdictNak, why: "waiting for " + blk.why, delay: blk.delay, block: blk, rec: cur}
			}
		}
		if b.beforeClaimWrite != nil {
			b.beforeClaimWrite(key)
		}
		err = b.writeClaim(ctx, next)
		if errors.Is(err, natsjs.ErrStale) {
			// Another claim won: the places taken for this one go back
			// (a rate token spent stays spent), not those it kept.
			b.written(ctx, keys, pl, true, now)
			continue
		}
		if err != nil {
			return claimResult{verdict: verdictNak, why: err.Error(), delay: outageDelay(delivered)}
		}
		if cur.Worker != "" {
			// A stale claim taken over: its attempt ended worker_lost. A
			// warning: a worker that vanishes mid-attempt is the
			// operator's to look into (a crash, a kill, a frozen host).
			b.observe(d.Name, job.OutcomeWorkerLost, next, cur.Attempt)
			b.log.WarnContext(jobCtx(ctx, cur), "attempt lost: its worker went silent", "job_id", cur.ID, "type", cur.Type,
				"tenant", cur.Tenant, "worker", cur.Worker, "attempt", cur.Attempt, "silent_for", now.Sub(b.signOf(cur)).Round(time.Millisecond),
				"taken_by", worker)
		}
		b.written(ctx, keys, pl, false, now)
		return claimResult{verdict: verdictRun, rec: next, first: cur.Attempt == 0, keys: keys, placesUntil: placesUntil(d, pl)}
	}
	return claimResult{verdict: verdictNak, why: "record kept changing", delay: jitter(time.Second)}
}

// writeClaim stores a claim by compare-and-set. A claim whose answer is
// lost may be stored: it is remembered, so that this broker hands it out
// when it meets it again rather than let it go silent (lost.go).
func (b *Broker) writeClaim(ctx context.Context, next *job.Record) error {
	err := b.stores.Jobs.Update(ctx, next)
	if err == nil && b.afterClaimWrite != nil {
		err = b.afterClaimWrite(next.Key())
	}
	switch {
	case err == nil:
		b.found(next.Key())
	case !errors.Is(err, natsjs.ErrStale):
		b.lose(next)
	}
	return err
}

// reassign hands cur's claim, written by this broker with its answer lost,
// to worker as the same attempt: no worker ever received it.
func (b *Broker) reassign(ctx context.Context, d *job.TypeDecl, cur *job.Record, delivered uint64, worker string, now time.Time) claimResult {
	next := cur.Clone()
	if err := next.Reassign(worker, now); err != nil {
		return claimResult{verdict: verdictAck, why: err.Error()}
	}
	next.ClaimID = newClaimID()
	// The same attempt: the new claim keeps the old one's places (renewed;
	// admit), and no rate token is taken again. Should that fail, the
	// stored claim, answered to no one, goes stale and is taken over.
	var keys []flowKey
	var pl placement
	if len(d.Concurrency) > 0 {
		keys = flowKeys(&job.TypeDecl{Name: d.Name, Flow: api.Flow{Concurrency: d.Concurrency}}, cur)
		var blk *flowBlock
		if pl, blk = b.admit(ctx, d.Name, keys, cur, next, now); blk != nil {
			return claimResult{verdict: verdictNak, why: "waiting for " + blk.why, delay: blk.delay}
		}
	}
	err := b.writeClaim(ctx, next)
	if errors.Is(err, natsjs.ErrStale) {
		b.written(ctx, keys, pl, true, now)
		return claimResult{verdict: verdictNak, why: "record changed", delay: jitter(retrySlack)}
	}
	if err != nil {
		return claimResult{verdict: verdictNak, why: err.Error(), delay: outageDelay(delivered)}
	}
	b.written(ctx, keys, pl, false, now)
	b.log.Info("lost claim handed out again", "job_id", next.ID, "attempt", next.Attempt, "worker", worker)
	return claimResult{verdict: verdictRun, rec: next, keys: keys, placesUntil: placesUntil(d, pl)}
}

// exhaust fails a job whose attempts ran out without a verdict on the last
// one (its worker vanished, or it was given back). It reports whether the
// job needs its work message no more.
func (b *Broker) exhaust(ctx context.Context, d *job.TypeDecl, key string) bool {
	now := b.cfg.Now().UTC()
	terminal, open := false, false
	rec, err := b.stores.Jobs.Mutate(ctx, key, func(n *job.Record) error {
		maxAttempts := n.AttemptsOr(d.Attempts)
		terminal, open = n.State.Terminal(), n.Worker != ""
		if n.State.Terminal() || n.AttemptsUsed() < maxAttempts {
			return errSkip
		}
		if n.State == job.StateRunning && n.Worker != "" && now.Sub(b.signOf(n)) < b.cfg.StaleAfter {
			return errSkip
		}
		return n.Fail(job.FinalFailure(n, maxAttempts), now)
	})
	switch {
	case errors.Is(err, job.ErrNotFound):
		return true
	case errors.Is(err, errSkip):
		return terminal
	case err != nil:
		return false
	}
	b.release(ctx, d, rec)
	b.log.InfoContext(jobCtx(ctx, rec), "job failed, attempts used up", "job_id", rec.ID, "attempt", rec.Attempt, "category", rec.Error.Category)
	if open {
		// The last attempt's worker vanished: that attempt ends here.
		// Without one, every attempt had its verdict counted already.
		b.observe(d.Name, job.OutcomeWorkerLost, rec, rec.Attempt)
	}
	b.eventAfter(rec, 0)
	return true
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

// signOf is a claim's last sign of life as this broker may judge it: its
// last beat, but not before this broker started. While no broker ran (a
// dispatcher restarting), a worker's beats had nowhere to go; a broker
// that starts gives every claim StaleAfter to beat again before it takes
// the job away, so a restart delays jobs and costs none an attempt.
func (b *Broker) signOf(r *job.Record) time.Time {
	sign := r.LastSign()
	if b.started.After(sign) {
		return b.started
	}
	return sign
}

package broker

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	failures "github.com/jobgate/jobgate/internal/verdict"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/api"
)

// heldJob is a job a request says it holds, checked.
type heldJob struct {
	decl *job.TypeDecl
	rec  *job.Record
}

// held checks that the request's credential owns the type, and that its
// token is the job's current claim: the job of that type is running under
// that attempt and has not been given back. A refusal says lost when the
// job has moved on (canceled, finished, taken over). A verdict (done, fail,
// give-back) is checked against the record as this broker last wrote it
// when it made the claim: the verdict's write is a compare-and-set on that
// revision, which fails, and is checked again on a fresh read, if anyone
// changed the job since. Other requests (a beat, whose answer is how a
// worker learns of a cancel) read the record.
func (b *Broker) held(ctx context.Context, r *request, h wire.Held, verdict bool) (*heldJob, *wire.Reply) {
	d, bad := b.decl(ctx, r.cred, r.typ)
	if bad != nil {
		return nil, bad
	}
	if len(h.Key) > 256 || len(h.Token) > 64 {
		return nil, refuse(wire.CodeBadRequest, "key or token too long")
	}
	if _, _, _, valid := natsjs.ScopeOf(h.Key); !valid {
		return nil, refuse(wire.CodeBadRequest, "not a job key")
	}
	if s := b.schedOf(r.typ); verdict && s != nil {
		if rec, _ := s.known(h.Key); rec != nil && b.check(rec, d, h) == nil {
			return &heldJob{decl: d, rec: rec}, nil
		}
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	rec, err := b.stores.Jobs.Get(octx, h.Key)
	switch {
	case errors.Is(err, job.ErrNotFound):
		return nil, refuse(wire.CodeLost, "no such job")
	case err != nil:
		return nil, refuse(wire.CodeUnavailable, "the job could not be read")
	}
	if reply := b.check(rec, d, h); reply != nil {
		if reply.Canceled {
			// The worker learns of the cancel here: the places its claim
			// holds go with it, not when a broker next looks at the job.
			b.release(octx, d, rec)
		}
		return nil, reply
	}
	return &heldJob{decl: d, rec: rec}, nil
}

// check compares a record with the claim a request presents.
func (b *Broker) check(rec *job.Record, d *job.TypeDecl, h wire.Held) *wire.Reply {
	if rec.Type != d.Name {
		// Another type's job: as if there were none.
		return refuse(wire.CodeLost, "no such job")
	}
	want := b.token(rec.Key(), rec.Attempt)
	if subtle.ConstantTimeCompare([]byte(want), []byte(h.Token)) != 1 || rec.State != job.StateRunning || rec.Worker == "" {
		reply := refuse(wire.CodeLost, "the job is %s and not this claim's", rec.State)
		reply.Canceled = rec.State == job.StateCanceled
		return reply
	}
	return nil
}

// write applies fn to the held job by compare-and-set, again on a fresh
// read after a concurrent write that left the claim in place; a write that
// finds the claim gone answers lost.
func (b *Broker) write(ctx context.Context, h *heldJob, held wire.Held, fn func(*job.Record) error) (*job.Record, *wire.Reply) {
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	cur := h.rec
	for range 5 {
		next := cur.Clone()
		if err := fn(next); err != nil {
			if errors.Is(err, errSkip) {
				return cur, nil
			}
			return nil, refuse(wire.CodeBadRequest, "%v", err)
		}
		if b.beforeWrite != nil {
			b.beforeWrite(cur.Key())
		}
		err := b.stores.Jobs.Update(octx, next)
		if err == nil {
			if s := b.schedOf(next.Type); s != nil {
				s.wrote(next, 0)
			}
			return next, nil
		}
		if !errors.Is(err, natsjs.ErrStale) {
			return nil, refuse(wire.CodeUnavailable, "the job could not be written")
		}
		fresh, gerr := b.stores.Jobs.Get(octx, cur.Key())
		if errors.Is(gerr, job.ErrNotFound) {
			return nil, refuse(wire.CodeLost, "no such job")
		}
		if gerr != nil {
			return nil, refuse(wire.CodeUnavailable, "the job could not be read")
		}
		if reply := b.check(fresh, h.decl, held); reply != nil {
			return nil, reply
		}
		cur = fresh
	}
	return nil, refuse(wire.CodeUnavailable, "the job kept changing")
}

// progress checks a worker's progress report.
func progress(p *wire.Progress) (*job.Progress, error) {
	if p == nil {
		return nil, nil
	}
	if p.Done < 0 || p.Total < 0 || p.Done > 1<<40 || p.Total > 1<<40 || len(p.Unit) > 32 || !printable(p.Unit) {
		return nil, errors.New("progress must be non-negative, at most 2^40, its unit at most 32 printable bytes")
	}
	return &job.Progress{Done: p.Done, Total: p.Total, Unit: p.Unit}, nil
}

func printable(s string) bool {
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// beat keeps a claim alive and records its progress; a moved progress is
// an event. Beats closer together than beatLimit write nothing new.
func (b *Broker) beat(ctx context.Context, r *request) *wire.Reply {
	var req wire.BeatRequest
	if bad := r.decode(&req); bad != nil {
		return bad
	}
	p, err := progress(req.Progress)
	if err != nil {
		return refuse(wire.CodeBadRequest, "%v", err)
	}
	h, bad := b.held(ctx, r, req.Held, false)
	if bad != nil {
		return bad
	}
	now := b.cfg.Now().UTC()
	// The places first: an attempt whose place lapsed is not kept alive.
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	placesUntil, err := b.hold(octx, h.decl, h.rec, now)
	cancel()
	switch {
	case errors.Is(err, natsjs.ErrLapsed):
		if bad := b.handBack(ctx, r.typ, h, req.Held, "place_lapsed"); bad != nil {
			return bad
		}
		return refuse(wire.CodeLost, "the attempt's concurrency place lapsed: the job was handed back")
	case err != nil:
		// Not ok: the worker must not count this beat as keeping its
		// attempt (its lease runs out as if the beat were lost).
		return refuse(wire.CodeUnavailable, "the job's concurrency places could not be renewed")
	}
	moved := p != nil && (h.rec.Progress == nil || *p != *h.rec.Progress)
	if !moved && now.Sub(h.rec.LastSign()) < b.beatLimit() {
		return b.leaseReply(h.rec.LastSign(), placesUntil, now)
	}
	rec, bad := b.write(ctx, h, req.Held, func(n *job.Record) error {
		if moved {
			n.SetProgress(*p, now)
		} else {
			n.Heartbeat(now)
		}
		return nil
	})
	if bad != nil {
		return bad
	}
	if moved {
		b.publishChange(rec)
	}
	return b.leaseReply(rec.LastSign(), placesUntil, now)
}

// leaseReply is a beat's ok: with how long the attempt is its worker's for
// sure from now (wire.Reply.LeaseMS).
func (b *Broker) leaseReply(sign, placesUntil, now time.Time) *wire.Reply {
	return &wire.Reply{LeaseMS: b.leaseLeft(sign, placesUntil, now).Milliseconds()}
}

// done finishes a held job as succeeded. Its result is the object this
// attempt uploaded, checked against what the store holds; the content type
// is the type's declared one.
func (b *Broker) done(ctx context.Context, r *request) *wire.Reply {
	var req wire.DoneRequest
	if bad := r.decode(&req); bad != nil {
		return bad
	}
	p, err := progress(req.Progress)
	if err != nil {
		return refuse(wire.CodeBadRequest, "%v", err)
	}
	h, bad := b.held(ctx, r, req.Held, true)
	if bad != nil {
		if bad.Error.Code == wire.CodeLost && b.succeededBy(ctx, req.Held) {
			// A done again whose first answer was lost: it stands.
			return ok
		}
		return bad
	}
	var out *job.Output
	if req.Result != nil {
		object := objectName(h.rec)
		if req.Result.Object != object {
			return refuse(wire.CodeBadRequest, "the result of this attempt is %s", object)
		}
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		size, sum, err := b.stores.ResultInfo(octx, object)
		cancel()
		switch {
		case errors.Is(err, job.ErrNotFound):
			return refuse(wire.CodeUnknown, "no result was stored for this attempt")
		case err != nil:
			return refuse(wire.CodeUnavailable, "the result could not be looked up")
		case size != req.Result.Size || sum != req.Result.SHA256:
			return refuse(wire.CodeBadRequest, "the stored result is %d bytes with SHA-256 %s", size, sum)
		case size > h.decl.MaxResultBytes:
			return refuse(wire.CodeTooLarge, "the result is larger than the type's limit")
		}
		out = &job.Output{Object: object, ContentType: h.decl.ContentType, Size: size, SHA256: sum}
	}
	now := b.cfg.Now().UTC()
	rec, bad := b.write(ctx, h, req.Held, func(n *job.Record) error {
		if p != nil {
			n.Progress = p
		}
		if err := n.Succeed(out, now); err != nil {
			return err
		}
		n.EndClaim() // its places are this broker's to give back (releaseEnded)
		return nil
	})
	if bad != nil {
		if bad.Error.Code == wire.CodeLost && b.succeededBy(ctx, req.Held) {
			// The success was stored, its answer lost, and the retry of
			// the write found it: it stands.
			return ok
		}
		if bad.Error.Code == wire.CodeLost && out != nil {
			b.dropResult(h.rec.Key(), objectName(h.rec))
		}
		return bad
	}
	b.releaseEnded(ctx, h.decl, h.rec)
	b.log.InfoContext(b.traceAttempt(rec, "succeeded", ""), "job succeeded", "job_id", rec.ID, "type", rec.Type, "attempt", rec.Attempt, "worker", h.rec.Worker)
	settle := b.end(r.typ, rec, "succeeded")
	if req.Next == nil {
		settle()
		return ok
	}
	// The worker's next job is picked while this one's event and work
	// message are settled: the answer waits for both, not one after the
	// other.
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		settle()
	}()
	reply := b.chain(ctx, r, h.decl, req.Next)
	<-settled
	return reply
}

// chainPatience bounds how late after its verdict's arrival a chained job
// is still answered (see take).
const chainPatience = 4 * time.Second

// chain answers a verdict that asks for the worker's next job as well
// (DoneRequest.Next) with a job ready now, if any. The verdict stands
// whatever the pick meets: a refusal of the pick answers ok with no job.
func (b *Broker) chain(ctx context.Context, r *request, d *job.TypeDecl, next *wire.NextRequest) *wire.Reply {
	if next == nil || next.Newcomer {
		return ok
	}
	// A chained request never waits: its wait_ms is not used, so it is not
	// held to next's bound either (docs/protocol/done.request.schema.json).
	unheld := *next
	unheld.WaitMS = 0
	if checkNext(&unheld) != nil {
		return ok
	}
	// A worker's verdict waits its own time for the answer (pkg/worker's
	// 10 s); the job it carries must reach the worker well within it.
	if reply := b.take(ctx, r, d, next, 0, r.since(b.cfg.Now()).Add(chainPatience)); reply.Job != nil {
		return reply
	}
	return ok
}

// fail ends a held job's attempt: retried after a jittered backoff while
// attempts remain and the failure allows it, failed otherwise. What the
// job's owner reads is jobgate's message of the category unless the worker
// marked a message as meant for users; the worker's own message goes to
// the log.
func (b *Broker) fail(ctx context.Context, r *request) *wire.Reply {
	var req wire.FailRequest
	h, bad := b.decodeHeld(ctx, r, &req, &req.Held, true)
	if bad != nil {
		return bad
	}
	f, err := failures.Failure(&req, h.rec.Type, h.rec.TimeoutOr(h.decl.Timeout()), h.decl.MaxResultBytes)
	if err != nil {
		return refuse(wire.CodeBadRequest, "%v", err)
	}
	if (req.Kind == wire.KindEndpointRejected || req.Kind == wire.KindEndpointError) && r.cred != wire.JobgateCredential {
		// The endpoint categories say jobgate called the handler itself.
		return refuse(wire.CodeBadRequest, "failure kind %s is jobgate's endpoint caller's", req.Kind)
	}
	if req.RetryAfterMS < 0 {
		return refuse(wire.CodeBadRequest, "retry_after_ms must not be negative")
	}
	maxAttempts := h.rec.AttemptsOr(h.decl.Attempts)
	now := b.cfg.Now().UTC()
	retryAt := now.Add(max(b.retryDelay(h.decl, h.rec.Attempt), min(time.Duration(req.RetryAfterMS)*time.Millisecond, wire.MaxRetryAfter)))
	outcome := "failed"
	rec, bad := b.write(ctx, h, req.Held, func(n *job.Record) error {
		// The worker's own message is the operator's: it goes to the
		// attempt's history, which only the admin API shows.
		if f.Retryable && n.AttemptsUsed() < maxAttempts {
			outcome = "retry"
			if err := n.ScheduleRetry(f, retryAt, now); err != nil {
				return err
			}
			n.NoteCause(req.Message)
			return nil
		}
		outcome = "failed"
		final := *f
		if f.Retryable {
			final.Message = fmt.Sprintf("%s (attempt %d of %d)", f.Message, n.Attempt, maxAttempts)
		}
		if err := n.Fail(&final, now); err != nil {
			return err
		}
		n.EndClaim() // its places are this broker's to give back (releaseEnded)
		n.NoteCause(req.Message)
		return nil
	})
	if bad != nil {
		return bad
	}
	b.dropResult(h.rec.Key(), objectName(h.rec))
	b.releaseEnded(ctx, h.decl, h.rec)
	b.log.InfoContext(b.traceAttempt(rec, outcome, string(f.Category)), "attempt failed", "job_id", rec.ID, "type", rec.Type, "tenant", rec.Tenant, "attempt", rec.Attempt, "worker", h.rec.Worker, "outcome", outcome,
		"category", f.Category, "cause", clip(req.Message, 2048))
	b.ended(r.typ, rec, outcome)
	return ok
}

// giveBack hands a held job back without a verdict: the attempt stays
// counted but uses up none of the job's attempts, and a fresh work message
// lets the next worker take it at once.
func (b *Broker) giveBack(ctx context.Context, r *request) *wire.Reply {
	var req wire.GiveBackRequest
	h, bad := b.decodeHeld(ctx, r, &req, &req.Held, true)
	if bad != nil {
		return bad
	}
	if bad := b.handBack(ctx, r.typ, h, req.Held, req.Reason); bad != nil {
		return bad
	}
	return ok
}

// handBack gives a held job back (giveBack; or a beat that found the
// attempt's place lapsed): the attempt ends with no verdict and uses up
// none of the job's attempts, and a fresh work message lets the next
// worker take it at once.
func (b *Broker) handBack(ctx context.Context, typ string, h *heldJob, held wire.Held, reason string) *wire.Reply {
	now := b.cfg.Now().UTC()
	rec, bad := b.write(ctx, h, held, func(n *job.Record) error { return n.GiveBack(now) })
	if bad != nil {
		return bad
	}
	b.dropResult(h.rec.Key(), objectName(h.rec))
	b.releaseEnded(ctx, h.decl, h.rec)
	b.log.InfoContext(b.traceAttempt(rec, "given_back", ""), "job given back", "job_id", rec.ID, "type", rec.Type, "attempt", rec.Attempt, "worker", h.rec.Worker, "reason", clip(reason, 64))
	b.ended(typ, rec, "given_back")
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	s := b.schedOf(typ)
	var old *holding
	if s != nil {
		old = s.finish(rec.Key())
	}
	// A fresh work message lets the next worker take the job at once; the
	// old one goes once the fresh one is stored, else it is the job's way
	// back.
	if err := b.stores.Work.Publish(octx, rec, int(rec.Revision)); err != nil {
		b.log.WarnContext(jobCtx(octx, rec), "work of a given-back job left to its pending delivery", "job_id", rec.ID, "err", err)
		if old != nil {
			s.later(&natsjs.LaneMsg{Seq: old.seq, Key: rec.Key(), Tenant: old.tenant, Requester: old.requester}, now.Add(outageDelay(1)))
		}
		return nil
	}
	if old != nil {
		b.drop(octx, s, old, rec.Key())
	}
	return nil
}

// objectName is the result object of a job's current attempt.
func objectName(r *job.Record) string { return fmt.Sprintf("%s.a%d", r.ID, r.Attempt) }

// succeededBy reports whether the job a claim held is succeeded by that
// very claim (the attempt of its token), with the result it uploaded.
func (b *Broker) succeededBy(ctx context.Context, h wire.Held) bool {
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	rec, err := b.stores.Jobs.Get(octx, h.Key)
	if err != nil || rec.State != job.StateSucceeded {
		return false
	}
	want := b.token(rec.Key(), rec.Attempt)
	return subtle.ConstantTimeCompare([]byte(want), []byte(h.Token)) == 1 &&
		(rec.Output == nil || rec.Output.Object == objectName(rec))
}

// dropResult removes an attempt's result that its job does not name (best
// effort: the results' retention removes what this misses). The record is
// read first: a write whose answer was lost may have stored the success
// that names it.
func (b *Broker) dropResult(key, object string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), opTimeout)
	defer cancel()
	rec, err := b.stores.Jobs.Get(ctx, key)
	if err != nil && !errors.Is(err, job.ErrNotFound) {
		b.log.Debug("orphaned result kept: its job could not be read", "object", object, "err", err)
		return
	}
	if rec != nil && rec.Output != nil && rec.Output.Object == object {
		return
	}
	if err := b.stores.DeleteResult(ctx, object); err != nil {
		b.log.Debug("orphaned result not deleted", "object", object, "err", err)
	}
}

// retryDelay is the pause before the attempt after attempt n: the type's
// retry policy as it is now (a change applies to the retries not yet
// scheduled), full jitter; a type without one starts from RetryBase.
func (b *Broker) retryDelay(d *job.TypeDecl, n int) time.Duration {
	p := d.Retry
	if p == nil || p.InitialSeconds == 0 {
		q := api.RetryPolicy{InitialSeconds: b.cfg.RetryBase.Seconds()}
		if p != nil {
			q.MaxSeconds, q.Multiplier = p.MaxSeconds, p.Multiplier
		}
		p = &q
	}
	return p.Delay(n, rand.Float64)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// decodeHeld decodes a request about a held job into req (whose held
// names the job and claim) and checks the claim (held).
func (b *Broker) decodeHeld(ctx context.Context, r *request, req any, held *wire.Held, verdict bool) (*heldJob, *wire.Reply) {
	if bad := r.decode(req); bad != nil {
		return nil, bad
	}
	return b.held(ctx, r, *held, verdict)
}

// ended accounts for an attempt's verdict: the outcome counted, the change
// announced, and then what the job needs next. A job that ended needs its
// slot and its work message no more: both go now, not when the message
// would have come up again. A job waiting for its retry keeps its slot,
// and its message comes up when the retry is due.
func (b *Broker) ended(typ string, rec *job.Record, outcome string) {
	b.end(typ, rec, outcome)()
}

// end is ended in two steps: what it returns does the store round trips
// (the change's event and, for a job that ended, the removal of its work
// message, at once), which a caller may overlap with other work of its
// own; the hold has ended when end returns, so a pick made meanwhile may
// have the job's slot.
func (b *Broker) end(typ string, rec *job.Record, outcome string) func() {
	b.observe(typ, outcome, rec, rec.Attempt)
	s := b.schedOf(typ)
	if s == nil {
		return func() { b.eventAfter(rec, 0) }
	}
	_, after := s.known(rec.Key())
	if !rec.State.Terminal() {
		return func() {
			s.wrote(rec, b.eventAfter(rec, after))
			if rec.RetryAt != nil && rec.Worker == "" {
				s.retryAt(rec.Key(), *rec.RetryAt)
			}
		}
	}
	h := s.finish(rec.Key())
	return func() {
		if h == nil {
			b.eventAfter(rec, after)
			return
		}
		removed := make(chan struct{})
		go func() {
			defer close(removed)
			ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), opTimeout)
			defer cancel()
			b.drop(ctx, s, h, rec.Key())
		}()
		b.eventAfter(rec, after)
		<-removed
	}
}

// publishChange publishes the event of a change this broker wrote of a job,
// after the job's newest event as the broker knows it.
func (b *Broker) publishChange(rec *job.Record) {
	s := b.schedOf(rec.Type)
	if s == nil {
		b.eventAfter(rec, 0)
		return
	}
	_, after := s.known(rec.Key())
	s.wrote(rec, b.eventAfter(rec, after))
}

// drop deletes the work message of a hold that ended; one that cannot be
// deleted now is looked at again later (and then found done).
func (b *Broker) drop(ctx context.Context, s *sched, h *holding, key string) {
	if err := s.lanes.Remove(ctx, h.seq); err != nil {
		b.log.Debug("work message not removed, looked at again later", "seq", h.seq, "err", err)
		s.later(&natsjs.LaneMsg{Seq: h.seq, Key: key, Tenant: h.tenant, Requester: h.requester}, b.cfg.Now().Add(outageDelay(1)))
	}
}

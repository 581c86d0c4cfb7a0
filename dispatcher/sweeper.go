package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// errSkip: on a fresh read the job needs nothing after all.
var errSkip = errors.New("nothing to do")

// startSweeper starts the watch that keeps the non-terminal jobs in memory
// and the ticker that recovers the silent ones. It returns once the watch
// has delivered the bucket's current records.
func (d *Dispatcher) startSweeper(sctx, runCtx context.Context) (func(), error) {
	w, err := d.jobs.Follow(runCtx)
	if err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	d.spawn(func() { d.watch(runCtx, w, ready) })
	select {
	case <-ready:
	case <-sctx.Done():
		w.Stop()
		return nil, sctx.Err()
	}
	d.spawn(func() {
		t := time.NewTicker(d.cfg.SweepInterval)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				d.sweep(runCtx)
			}
		}
	})
	return w.Stop, nil
}

func (d *Dispatcher) watch(ctx context.Context, w *natsjs.RecordWatch, ready chan struct{}) {
	initial := true
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Changes():
			if !ok {
				return
			}
			if e.Synced {
				if initial {
					initial = false
					close(ready)
					d.log.Debug("sweeper watching", "open_jobs", d.running.len())
				}
				continue
			}
			if e.Deleted {
				d.running.forget(e.Key)
				continue
			}
			r, err := e.Record()
			if err != nil {
				d.running.forget(e.Key)
				continue
			}
			d.running.observe(e.Key, r, d.cfg.staleAfter(r))
		}
	}
}

// sweep fails the open jobs whose retention is about to end, recovers the
// running jobs that went silent and checks on the queued jobs that waited
// long. It looks only at the open jobs the watch keeps in memory, never at
// the bucket.
func (d *Dispatcher) sweep(ctx context.Context) {
	now := d.cfg.Now()
	d.observeGauges(ctx)
	expiring, stale, queued := d.running.due(now, now.Add(-d.cfg.QueuedCheckAfter), d.expiresBefore(now))
	for _, key := range expiring {
		if ctx.Err() != nil {
			return
		}
		d.expire(ctx, key)
	}
	for _, key := range stale {
		if ctx.Err() != nil {
			return
		}
		d.running.checked(key, now)
		d.recoverSilent(ctx, key)
	}
	for _, key := range queued {
		if ctx.Err() != nil {
			return
		}
		d.running.checked(key, now)
		d.checkQueued(ctx, key)
	}
	for _, key := range d.running.missedStart(now) {
		if ctx.Err() != nil {
			return
		}
		d.cancelLate(ctx, key)
	}
}

// recoverSilent handles a running job with no sign of life for longer than
// its attempt budget plus grace. After its last attempt it fails with that
// attempt's cause (worker_lost when the attempt's worker vanished). While
// attempts remain it is re-dispatched (a silent attempt counts as
// worker_lost), unless its work message is still in the queue and may yet
// bring it back: not delivered yet (a backlog), or delivered and pending,
// which is given one more period before a new message is published anyway.
func (d *Dispatcher) recoverSilent(ctx context.Context, key string) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	cur, err := d.jobs.Get(octx, key)
	if err != nil {
		if !errors.Is(err, job.ErrNotFound) {
			d.log.Warn("sweeper: could not read job", "key", key, "err", err)
		}
		return
	}
	now := d.cfg.Now().UTC()
	if cur.State != job.StateRunning || now.Sub(lastSign(cur)) <= d.cfg.staleAfter(cur) {
		return
	}
	maxAttempts := cur.AttemptsOr(d.cfg.MaxAttempts)
	// A job given back by its worker (an outage) has its attempt still to
	// run: it is never failed for the time it waited.
	exhausted := cur.AttemptsUsed() >= maxAttempts
	if !exhausted {
		ws, err := d.work.Pending(octx, cur)
		if err != nil {
			d.log.WarnContext(tracing.Extract(octx, cur.Trace, cur.TraceState), "sweeper: could not look up work", "job_id", cur.ID, "err", err)
			return
		}
		if ws.Seq != 0 && (!ws.Delivered || !d.running.suspect(key, ws.Seq)) {
			return
		}
	}
	next := cur.Clone()
	action := "redispatch"
	if exhausted {
		action = "fail"
		if err := next.Fail(job.FinalFailure(next, maxAttempts), now); err != nil {
			return
		}
	} else {
		if next.Worker != "" {
			next.Error = job.WorkerLost(next)
		}
		if err := next.Release(now); err != nil {
			return
		}
	}
	octx, span := d.sweepSpan(octx, action, cur)
	defer span.End()
	if cur.Worker != "" {
		span.SetAttributes(attribute.String("jobgate.attempt.outcome", job.OutcomeWorkerLost), attribute.String("jobgate.worker", cur.Worker))
	}
	// A compare-and-set against the version judged silent: if anything
	// wrote the job meanwhile, this sweep leaves it.
	if err := d.jobs.Update(octx, next); err != nil {
		sweepLost(span, err)
		if !errors.Is(err, natsjs.ErrStale) {
			d.log.WarnContext(octx, "sweeper: could not recover job", "key", key, "job_id", cur.ID, "err", err)
		}
		return
	}
	if next.Error != nil {
		span.SetAttributes(attribute.String("jobgate.error.category", string(next.Error.Category)))
	}
	if cur.Worker != "" {
		// The silent attempt ended here: its worker vanished, which is
		// the operator's to look into (a crash, a kill, a frozen host).
		d.attemptEnded(next, job.OutcomeWorkerLost, cur.Attempt)
		d.log.WarnContext(octx, "attempt lost: its worker went silent", "job_id", cur.ID, "type", cur.Type, "tenant", cur.Tenant,
			"worker", cur.Worker, "attempt", cur.Attempt, "silent_for", now.Sub(lastSign(cur)).Round(time.Second), "action", action)
	}
	d.settled(octx, next, "sweeper")
}

// sweepSpan starts the span of a recovery of rec (action: redispatch,
// fail, requeue, expire), a child of the job's admission: a sweep is a
// step of the job's trace, and the work it publishes carries its context.
func (d *Dispatcher) sweepSpan(ctx context.Context, action string, rec *job.Record) (context.Context, trace.Span) {
	return tracing.Tracer().Start(tracing.Extract(ctx, rec.Trace, rec.TraceState), "sweep "+action, trace.WithAttributes(
		attribute.String("jobgate.job.id", rec.ID), attribute.String("jobgate.job.type", rec.Type),
		attribute.String("jobgate.tenant", rec.Tenant), attribute.String("jobgate.job.state", string(rec.State)),
		attribute.Int("jobgate.attempt", rec.Attempt), attribute.String("jobgate.sweeper.action", action)))
}

// sweepLost marks a recovery span whose write did not happen: another
// writer won (stale), or the store failed.
func sweepLost(span trace.Span, err error) {
	if errors.Is(err, natsjs.ErrStale) {
		span.SetAttributes(attribute.Bool("jobgate.sweeper.lost_race", true))
		return
	}
	span.SetStatus(codes.Error, "write failed")
}

// attemptEnded counts attempt n of rec, which a sweep ended
// (jobgate_attempts_total, jobgate_attempt_duration_seconds).
func (d *Dispatcher) attemptEnded(rec *job.Record, outcome string, n int) {
	took, known := rec.AttemptTook(n)
	if !known {
		took = -1
	}
	d.cfg.Metrics.Attempt(rec.Type, outcome, took)
}

// settled announces what a recovery did: a failed job's event, or a
// re-dispatched job's fresh work message. Its generation is the revision of
// the write that re-dispatched it: unique, so de-duplication never swallows
// it, and equal for every dispatcher that could race to publish it.
func (d *Dispatcher) settled(ctx context.Context, rec *job.Record, by string) {
	if rec.State == job.StateFailed {
		d.cfg.Metrics.StalledJob("failed")
		d.log.InfoContext(ctx, "job failed", "by", by, "job_id", rec.ID, "attempt", rec.Attempt, "category", rec.Error.Category)
		if _, err := d.events.Publish(ctx, rec); err != nil {
			d.log.DebugContext(ctx, "event left to the relay", "job_id", rec.ID, "err", err)
		}
		return
	}
	if err := d.work.Publish(ctx, rec, int(rec.Revision)); err != nil {
		// The record says a retry is due now; if the work never reaches the
		// queue the job goes silent again and the next sweep re-dispatches.
		trace.SpanFromContext(ctx).SetStatus(codes.Error, "re-dispatch not published")
		d.log.WarnContext(ctx, "re-dispatch not published", "by", by, "job_id", rec.ID, "err", err)
		return
	}
	d.cfg.Metrics.StalledJob("redispatched")
	d.log.InfoContext(ctx, "job re-dispatched", "by", by, "job_id", rec.ID, "attempts_used", rec.Attempt)
}

// checkQueued looks after a job queued for long: a job whose work message
// is gone (lost between commit and publish beyond the relay's reach, or
// dropped) gets a new one. A queued job is never failed for waiting (short
// of its retention, see expire): an outage, or a type whose workers are
// all stopped, delays it; it runs when a worker of its type is back.
func (d *Dispatcher) checkQueued(ctx context.Context, key string) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	cur, err := d.jobs.Get(octx, key)
	if err != nil {
		if !errors.Is(err, job.ErrNotFound) {
			d.log.Warn("sweeper: could not read job", "key", key, "err", err)
		}
		return
	}
	if cur.State != job.StateQueued {
		return
	}
	ws, err := d.work.Pending(octx, cur)
	if err != nil {
		d.log.WarnContext(tracing.Extract(octx, cur.Trace, cur.TraceState), "sweeper: could not look up work", "job_id", cur.ID, "err", err)
		return
	}
	if ws.Seq != 0 {
		return // waiting its turn
	}
	octx, span := d.sweepSpan(octx, "requeue", cur)
	defer span.End()
	now := d.cfg.Now().UTC()
	rec, err := d.jobs.Mutate(octx, key, func(n *job.Record) error {
		if n.State != job.StateQueued {
			return errSkip
		}
		n.UpdatedAt = now // a new revision names the new work message
		return nil
	})
	switch {
	case errors.Is(err, errSkip), errors.Is(err, job.ErrNotFound):
		return
	case err != nil:
		sweepLost(span, err)
		d.log.WarnContext(octx, "sweeper: could not recover queued job", "job_id", cur.ID, "err", err)
		return
	}
	d.settled(octx, rec, "sweeper")
}

// expire fails an open job whose retention is about to end, so that its
// record is never deleted while the job is open and its owner is told. The
// failure is written by compare-and-set, a new message in the bucket that
// restarts the record's age: the key protects the failed job for a whole
// JobTTL more. A lost race leaves the job to the next sweep, which sees
// the version that won.
func (d *Dispatcher) expire(ctx context.Context, key string) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	cur, err := d.jobs.Get(octx, key)
	if err != nil {
		if !errors.Is(err, job.ErrNotFound) {
			d.log.Warn("sweeper: could not read job", "key", key, "err", err)
		}
		return
	}
	now := d.cfg.Now().UTC()
	if cur.State.Terminal() || !cur.RetentionStart().Before(d.expiresBefore(now)) {
		return
	}
	next := cur.Clone()
	ttl, _ := d.retention()
	if err := next.Expire(ttl, now); err != nil {
		return
	}
	octx, span := d.sweepSpan(octx, "expire", cur)
	defer span.End()
	if cur.State == job.StateRunning && cur.Worker != "" {
		span.SetAttributes(attribute.String("jobgate.attempt.outcome", "expired"), attribute.String("jobgate.worker", cur.Worker))
	}
	if err := d.jobs.Update(octx, next); err != nil {
		sweepLost(span, err)
		if !errors.Is(err, natsjs.ErrStale) {
			d.log.WarnContext(octx, "sweeper: could not expire job", "job_id", cur.ID, "err", err)
		}
		return
	}
	d.cfg.Metrics.StalledJob("expired")
	if cur.State == job.StateRunning && cur.Worker != "" {
		d.attemptEnded(next, "expired", cur.Attempt)
	}
	span.SetAttributes(attribute.String("jobgate.error.category", string(next.Error.Category)))
	d.log.InfoContext(octx, "job failed", "by", "sweeper", "job_id", next.ID, "was", cur.State, "category", next.Error.Category,
		"created_at", next.CreatedAt)
	if _, err := d.events.Publish(octx, next); err != nil {
		d.log.DebugContext(octx, "event left to the relay", "job_id", next.ID, "err", err)
	}
}

// storeTTL is what a record store that knows its retention offers
// (natsjs.Store).
type storeTTL interface{ TTL() time.Duration }

// retention is the job TTL and the expire margin in force.
func (d *Dispatcher) retention() (ttl, margin time.Duration) {
	var store time.Duration
	if s, ok := d.jobs.(storeTTL); ok {
		store = s.TTL()
	}
	return d.cfg.retention(store)
}

// expiresBefore is the creation time before which an open job is failed
// expired at now; the zero time (nothing expires) when the TTL is unknown.
func (d *Dispatcher) expiresBefore(now time.Time) time.Time {
	ttl, margin := d.retention()
	if ttl == 0 {
		return time.Time{}
	}
	return now.Add(-(ttl - margin))
}

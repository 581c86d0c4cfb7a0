package dispatcher

import (
	"context"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// relayRetry is how long a record change that could not be relayed waits
// before it is delivered again.
const relayRetry = time.Second

// startRelay consumes the record change log (see relay). Because it
// follows the durable log, a job committed by a gateway that died before
// publishing still reaches the queue.
func (d *Dispatcher) startRelay(sctx, runCtx context.Context) (func(), error) {
	var changes *natsjs.ChangeLog
	err := d.untilAvailable(sctx, func(ctx context.Context) (err error) {
		changes, err = d.jobs.ConsumeChanges(ctx, d.cfg.RelayBatch)
		return err
	})
	if err != nil {
		return nil, err
	}
	d.relayLog = changes
	d.follow(runCtx, "relay", changes, natsjs.JobChangeKey, d.relay)
	return changes.Stop, nil
}

// eventGrace is how long the relay leaves a terminal change's event to the
// writer of the change before it checks that the event was stored.
const eventGrace = 2 * time.Second

// relay handles one record change. Work: a queued job's work message is
// published (generation 0, the very message the gateway publishes, so
// de-duplication makes the normal case free): this closes the gap of a
// gateway that died between its commit and its publish. Events: the writer
// of a change publishes its event, once, so a plain NATS subscriber sees
// each change one time; the relay publishes the admission's (the gateway
// leaves that to it, keeping admission to its own writes) unless the job
// has moved on already, and, after a grace period, the event of a terminal
// change whose writer died before publishing it.
func (d *Dispatcher) relay(ctx context.Context, c *natsjs.LoggedChange) {
	if c.Deleted() {
		_ = c.Ack() // deletions, purges and expiries announce nothing
		return
	}
	rec, err := c.Record()
	if err != nil {
		d.log.Error("relay: undecodable job record", "subject", c.Subject(), "err", err)
		_ = c.Term("undecodable record")
		return
	}
	octx, cancel := opCtx(ctx) // ctx is d.force: it ends only when a Stop runs out of time
	defer cancel()
	switch {
	case rec.State == job.StateQueued:
		// The relay's publish is a child of the job's admission span (the
		// broker's attempt is too: it reads the record's).
		var span trace.Span
		octx, span = tracing.Tracer().Start(tracing.Extract(octx, rec.Trace, rec.TraceState), "relay publish",
			trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
				attribute.String("jobgate.job.id", rec.ID), attribute.String("jobgate.job.type", rec.Type),
				attribute.String("jobgate.tenant", rec.Tenant)))
		defer span.End()
		// The admission's event goes out before any work exists that a
		// worker could claim and announce ahead of it. JetStream stores it
		// at once only as the job's first event; when the job's subject
		// holds events already, they are either a worker's, who moved the
		// job on (its work published by the gateway), or an earlier job's
		// under the same id (admitted again after its record expired): an
		// in-order publish stores it only in the second case.
		event, first, err := d.events.PublishFirst(octx, rec)
		if err == nil && !first {
			first, err = d.events.Publish(octx, rec)
		}
		if err != nil {
			d.log.WarnContext(octx, "relay: event not published, will retry", "job_id", rec.ID, "err", err)
			span.SetStatus(codes.Error, "event not published")
			_ = c.Nak(relayRetry)
			return
		}
		span.SetAttributes(attribute.Bool("jobgate.relay.event_stored", first))
		if first {
			d.cfg.Metrics.Relayed("event")
		}
		// The work names the admission's event, so that the claim's event
		// follows it without a lookup.
		if err := d.work.PublishAfterEvent(octx, rec, 0, event); err != nil {
			d.log.WarnContext(octx, "relay: work not published, will retry", "job_id", rec.ID, "err", err)
			span.SetStatus(codes.Error, "work not published")
			_ = c.Nak(relayRetry)
			return
		}
		d.cfg.Metrics.Relayed("work")
	case rec.State == job.StateScheduled:
		d.relayScheduled(octx, c, rec)
		return
	case rec.State.Terminal():
		if d.announced.has(rec.Key(), rec.Revision) {
			break // this process's broker stored its event
		}
		if age := d.cfg.Now().Sub(c.Stored()); age < eventGrace {
			// Held here rather than delivered again: its writer is most
			// likely this process's broker, about to announce it.
			d.holdTerminal(c, rec, eventGrace-age)
			return
		}
		d.checkTerminal(octx, c, rec)
		return
	}
	_ = c.Ack()
}

// relayScheduled handles a scheduled record (its admission, or a renewal):
// the admission's event (state scheduled; a renewal's is its writer's),
// then its entry in the scheduled set, which the waker reads when the
// run_at comes (again for a renewal: the stream drops entries as old as
// the retention), and its next renewal when the run_at is more than half
// a retention away. No work exists before the run_at.
func (d *Dispatcher) relayScheduled(ctx context.Context, c *natsjs.LoggedChange, rec *job.Record) {
	if rec.RunAt == nil {
		// Not a record jobgate writes: nothing would ever wake it.
		d.log.ErrorContext(ctx, "relay: scheduled job without a run_at", "job_id", rec.ID)
		_ = c.Term("scheduled without run_at")
		return
	}
	if _, _, err := d.events.PublishFirst(ctx, rec); err != nil {
		d.log.WarnContext(ctx, "relay: event not published, will retry", "job_id", rec.ID, "err", err)
		_ = c.Nak(relayRetry)
		return
	}
	if err := d.schedule.Add(ctx, rec); err != nil {
		d.log.WarnContext(ctx, "relay: scheduled job not added to the scheduled set, will retry", "job_id", rec.ID, "err", err)
		_ = c.Nak(relayRetry)
		return
	}
	// A wait longer than half the retention has the record written again
	// halfway (the waker's renew), and so on until the run_at is near.
	if ttl, _ := d.retention(); ttl > 0 && rec.RunAt.Sub(rec.UpdatedAt) > ttl/2 {
		if err := d.schedule.AddRenewal(ctx, rec, rec.UpdatedAt.Add(ttl/2)); err != nil {
			d.log.WarnContext(ctx, "relay: scheduled job's renewal not added, will retry", "job_id", rec.ID, "err", err)
			_ = c.Nak(relayRetry)
			return
		}
	}
	d.cfg.Metrics.Relayed("schedule")
	_ = c.Ack()
}

// checkTerminal publishes the event of a terminal change whose writer left
// it out (it is stored only while the job's newest event is older), and
// acknowledges the change.
func (d *Dispatcher) checkTerminal(ctx context.Context, c *natsjs.LoggedChange, rec *job.Record) {
	if d.announced.has(rec.Key(), rec.Revision) {
		_ = c.Ack()
		return
	}
	stored, err := d.events.Publish(ctx, rec)
	if err != nil {
		d.log.WarnContext(ctx, "relay: event not published, will retry", "job_id", rec.ID, "err", err)
		_ = c.Nak(relayRetry)
		return
	}
	if stored {
		d.log.InfoContext(ctx, "relay: published the event its writer left out", "job_id", rec.ID, "state", rec.State)
		d.cfg.Metrics.Relayed("event")
	}
	_ = c.Ack()
}

// holdTerminal checks a terminal change once its event grace is over,
// holding it unacknowledged meanwhile (within the consumer's ack wait and
// its max ack pending: at most one grace per change).
func (d *Dispatcher) holdTerminal(c *natsjs.LoggedChange, rec *job.Record, wait time.Duration) {
	d.heldMu.Lock()
	defer d.heldMu.Unlock()
	if d.force.Err() != nil {
		return // stopping: delivered again, to another dispatcher or the next
	}
	d.held[c] = time.AfterFunc(wait, func() {
		d.heldMu.Lock()
		_, ok := d.held[c]
		delete(d.held, c)
		d.heldMu.Unlock()
		if !ok {
			return
		}
		ctx, cancel := opCtx(d.force)
		defer cancel()
		d.checkTerminal(ctx, c, rec)
	})
}

// releaseHeld stops the grace timers: their changes, unacknowledged, are
// delivered again after the consumer's ack wait.
func (d *Dispatcher) releaseHeld() {
	d.heldMu.Lock()
	defer d.heldMu.Unlock()
	for c, t := range d.held {
		t.Stop()
		delete(d.held, c)
	}
}

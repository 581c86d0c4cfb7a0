package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/job"
)

// relayRetry is how long a record change that could not be relayed waits
// before it is delivered again.
const relayRetry = time.Second

// startRelay consumes the record change log: for every change the queued
// job's work is published (generation 0, so it is the very message the
// gateway publishes and de-duplication makes the normal case free) and the
// change's event is published (de-duplicated per state and attempt).
// Because it follows the durable log, a job committed by a gateway that
// died before publishing still reaches the queue.
func (d *Dispatcher) startRelay(sctx, runCtx context.Context) (func(), error) {
	changes, err := d.jobs.ConsumeChanges(sctx, d.cfg.RelayBatch)
	if err != nil {
		return nil, err
	}
	d.relayLog = changes
	d.spawn(func() {
		for {
			c, err := changes.Next()
			if err != nil {
				if errors.Is(err, natsjs.ErrFeedStopped) {
					return
				}
				d.log.Warn("relay pull failed", "err", err)
				select {
				case <-runCtx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
			d.relay(runCtx, c)
		}
	})
	return changes.Stop, nil
}

// relay handles one record change.
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
	octx, cancel := opCtx(context.WithoutCancel(ctx))
	defer cancel()
	if rec.State == job.StateQueued {
		if err := d.work.Publish(octx, rec, 0); err != nil {
			d.log.Warn("relay: work not published, will retry", "job_id", rec.ID, "err", err)
			_ = c.Nak(relayRetry)
			return
		}
		d.cfg.Metrics.Relayed("work")
	}
	if err := d.events.Publish(octx, rec); err != nil {
		d.log.Warn("relay: event not published, will retry", "job_id", rec.ID, "err", err)
		_ = c.Nak(relayRetry)
		return
	}
	d.cfg.Metrics.Relayed("event")
	_ = c.Ack()
}

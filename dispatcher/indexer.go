package dispatcher

import (
	"context"

	"github.com/jobgate/jobgate/internal/natsjs"
)

// indexFeed is the record change log through the indexer's consumer
// (natsjs.Store).
type indexFeed interface {
	ConsumeIndexChanges(ctx context.Context, batch int) (*natsjs.ChangeLog, error)
}

// startIndexer follows the record change log on the indexer's durable
// consumer and lists every job under its requester (natsjs.Index), which
// GET /v1/jobs pages through. It is the relay's twin rather than a step of
// the relay: its acknowledgements mean "indexed" and nothing else, so a
// gateway can wait for them, while the relay holds some changes back.
func (d *Dispatcher) startIndexer(sctx, runCtx context.Context) (func(), error) {
	if d.index == nil || d.indexFeed == nil {
		return func() {}, nil
	}
	var changes *natsjs.ChangeLog
	err := d.untilAvailable(sctx, func(ctx context.Context) (err error) {
		changes, err = d.indexFeed.ConsumeIndexChanges(ctx, d.cfg.RelayBatch)
		return err
	})
	if err != nil {
		return nil, err
	}
	d.follow(runCtx, "indexer", changes, requesterOf, d.indexChange)
	return changes.Stop, nil
}

// indexChange lists the job of one record change. Every change, not only
// the creation: with one revision kept per key, a job that changed before
// the indexer got to it has no creation left in the log.
func (d *Dispatcher) indexChange(ctx context.Context, c *natsjs.LoggedChange) {
	if c.Deleted() {
		_ = c.Ack()
		return
	}
	rec, err := c.Record()
	if err != nil {
		_ = c.Term("undecodable record") // the relay logs it
		return
	}
	octx, cancel := opCtx(ctx) // ctx is d.force: it ends only when a Stop runs out of time
	defer cancel()
	if err := d.index.Append(octx, rec); err != nil {
		d.log.Warn("indexer: job not listed, will retry", "job_id", rec.ID, "err", err)
		_ = c.Nak(relayRetry)
		return
	}
	_ = c.Ack()
}

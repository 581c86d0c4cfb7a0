package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/job"
	"github.com/nats-io/nats.go/jetstream"
)

// relayPullExpiry is how long one pull request of the relay lasts.
const relayPullExpiry = 5 * time.Second

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
	cons, err := natsjs.EnsureRelayConsumer(sctx, d.res.JS)
	if err != nil {
		return nil, err
	}
	// A short pull expiry (heartbeats at half of it) notices within seconds
	// that a pull died with a cluster node, instead of after the default 30s.
	it, err := cons.Messages(jetstream.PullMaxMessages(d.cfg.RelayBatch), jetstream.PullExpiry(relayPullExpiry))
	if err != nil {
		return nil, err
	}
	d.relayCons = cons
	d.spawn(func() {
		for {
			msg, err := it.Next()
			if err != nil {
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					return
				}
				d.log.Warn("relay pull failed", "err", err)
				select {
				case <-runCtx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
			d.relay(runCtx, msg)
		}
	})
	return it.Drain, nil
}

// relay handles one record change.
func (d *Dispatcher) relay(ctx context.Context, msg jetstream.Msg) {
	if natsjs.KVOperation(msg.Headers()) != "" {
		_ = msg.Ack() // deletions and purges announce nothing
		return
	}
	md, err := msg.Metadata()
	if err != nil {
		_ = msg.TermWithReason("no metadata")
		return
	}
	rec, err := job.UnmarshalRecord(msg.Data(), md.Sequence.Stream)
	if err != nil {
		d.log.Error("relay: undecodable job record", "subject", msg.Subject(), "err", err)
		_ = msg.TermWithReason("undecodable record")
		return
	}
	octx, cancel := opCtx(context.WithoutCancel(ctx))
	defer cancel()
	if rec.State == job.StateQueued {
		if err := natsjs.PublishWork(octx, d.res.JS, rec, 0); err != nil {
			d.log.Warn("relay: work not published, will retry", "job_id", rec.ID, "err", err)
			_ = msg.NakWithDelay(relayRetry)
			return
		}
		d.cfg.Metrics.Relayed("work")
	}
	if err := natsjs.PublishEvent(octx, d.res.JS, rec); err != nil {
		d.log.Warn("relay: event not published, will retry", "job_id", rec.ID, "err", err)
		_ = msg.NakWithDelay(relayRetry)
		return
	}
	d.cfg.Metrics.Relayed("event")
	_ = msg.Ack()
}

package dispatcher

import (
	"context"
	"errors"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/job"
)

// advisoryQueue is the queue group of the dispatchers: each advisory is
// handled by one of them.
const advisoryQueue = "jobgate-dispatchers"

// startAdvisories subscribes to the renderers consumer's max-deliveries
// advisories. They are plain NATS messages, missed while no dispatcher
// runs; the renderers' own attempt count and the sweeper cover that.
func (d *Dispatcher) startAdvisories(_, runCtx context.Context) (func(), error) {
	w, err := d.work.WatchExhausted(advisoryQueue)
	if err != nil {
		return nil, err
	}
	d.spawn(func() {
		for {
			a, err := w.Next(runCtx)
			if runCtx.Err() != nil {
				return
			}
			if err != nil {
				d.log.Warn("advisory ignored", "err", err)
				continue
			}
			d.exhausted(runCtx, a)
		}
	})
	return w.Stop, nil
}

// exhausted handles one max-deliveries advisory: the job of the dead work
// message fails (last attempt's cause; worker_lost if that attempt's worker
// vanished; exhausted where no attempt reached a verdict) unless it is
// finished or its worker is demonstrably alive; the dead message is removed
// from the work queue.
func (d *Dispatcher) exhausted(ctx context.Context, a natsjs.MaxDeliveries) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	key, err := d.work.At(octx, a.StreamSeq)
	if err != nil {
		if !errors.Is(err, natsjs.ErrWorkGone) {
			d.log.Warn("advisory: work message not readable", "seq", a.StreamSeq, "err", err)
		}
		return
	}
	now := d.cfg.Now().UTC()
	rec, err := d.jobs.Mutate(octx, key, func(n *job.Record) error {
		if n.State.Terminal() {
			return errSkip
		}
		if n.State == job.StateRunning && n.Worker != "" && now.Sub(lastSign(n)) < d.cfg.LiveHeartbeat {
			return errSkip // its worker is alive and will reach a verdict
		}
		f := job.FinalFailure(n, d.cfg.MaxAttempts)
		if err := n.Transition(job.StateFailed, now); err != nil {
			return err
		}
		n.Error = f
		return nil
	})
	switch {
	case errors.Is(err, errSkip), errors.Is(err, job.ErrNotFound), err == nil:
		if err := d.work.Delete(octx, a.StreamSeq); err != nil {
			d.log.Warn("could not delete dead work message", "seq", a.StreamSeq, "err", err)
		}
	default:
		d.log.Warn("advisory: could not fail job", "key", key, "err", err)
		return
	}
	if err == nil {
		d.settled(octx, rec, "max-deliveries")
	}
}

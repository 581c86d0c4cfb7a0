package dispatcher

import (
	"context"
	"errors"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// cancelLate cancels a queued job that no attempt started by its start_by
// (error category deadline_exceeded) and publishes the cancel's event,
// which notifies it like any terminal state. A scheduled job whose start_by
// passed is canceled by the waker instead (wake), and the broker refuses
// to start an attempt of a job past its start_by, so a sweep period late
// never runs a job too late. A lost race leaves the job to whoever won: a
// claim that started it in time, or another dispatcher's cancel.
func (d *Dispatcher) cancelLate(ctx context.Context, key string) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	now := d.cfg.Now().UTC()
	rec, err := d.jobs.Mutate(octx, key, func(n *job.Record) error {
		if !n.MissedStart(now) {
			return errSkip
		}
		return n.CancelDeadline(now)
	})
	switch {
	case errors.Is(err, errSkip), errors.Is(err, job.ErrNotFound):
		return
	case err != nil:
		if !errors.Is(err, natsjs.ErrStale) {
			d.log.Warn("sweeper: could not cancel a job past its start_by", "key", key, "err", err)
		}
		return
	}
	d.running.forget(key)
	d.log.Info("job canceled", "by", "sweeper", "job_id", rec.ID, "category", job.CategoryDeadline)
	if _, err := d.events.Publish(octx, rec); err != nil {
		d.log.Debug("event left to the relay", "job_id", rec.ID, "err", err)
	}
}

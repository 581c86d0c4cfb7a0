package renderer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/failpoint"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/job"
	"github.com/nats-io/nats.go/jetstream"
)

// lease is one attempt's hold on a job: the record as this attempt last
// wrote it and the work message it came with. Every record write of the
// attempt goes through it, serialized, as a compare-and-set; a write that
// finds the job canceled, finished or claimed by another attempt marks the
// lease lost, and the attempt stops at its next checkpoint.
type lease struct {
	r   *Renderer
	msg jetstream.Msg
	id  string

	mu        sync.Mutex
	rec       *job.Record
	lastWrite time.Time
	lost      *job.Record // the record that showed the lease lost
	next      int         // page count of the next progress checkpoint
	step      int
	firstDone bool
}

func newLease(r *Renderer, rec *job.Record, msg jetstream.Msg) *lease {
	total := 0
	if rec.Progress != nil {
		total = rec.Progress.Total
	}
	step := max(1, (total*r.cfg.CheckpointPercent+99)/100)
	return &lease{r: r, msg: msg, id: rec.ID, rec: rec, lastWrite: r.cfg.Now(), step: step, next: step}
}

// record returns the record as last written by this attempt.
func (l *lease) record() *job.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec.Clone()
}

// lostTo returns the record that took the job away, or nil.
func (l *lease) lostTo() *job.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// update applies fn to the attempt's record and writes it by
// compare-and-set. A lost race against a write that left the job this
// attempt's (nobody else writes such a record today, but a future field
// might) is retried on the fresh record; any other outcome of the re-read
// marks the lease lost and returns errLost.
func (l *lease) update(ctx context.Context, fn func(r *job.Record) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return errLost
	}
	for range 5 {
		next := l.rec.Clone()
		if err := fn(next); err != nil {
			return err
		}
		// Each write has its own short deadline, not just the attempt's: a
		// write lost with a cluster node is never answered, and waiting for
		// it would hold l.mu and so stop the heartbeats and InProgress of
		// keepAlive until another renderer takes the job as abandoned.
		wctx, cancel := context.WithTimeout(ctx, l.writeTimeout())
		err := l.r.res.Jobs.Update(wctx, next)
		cancel()
		if err == nil {
			l.rec = next
			l.lastWrite = l.r.cfg.Now()
			return nil
		}
		if !errors.Is(err, natsjs.ErrStale) {
			return err
		}
		gctx, cancel := context.WithTimeout(ctx, l.writeTimeout())
		cur, gerr := l.r.res.Jobs.Get(gctx, l.rec.Key())
		cancel()
		if gerr != nil {
			if errors.Is(gerr, job.ErrNotFound) {
				l.lost = l.rec.Clone()
				return errLost
			}
			return gerr
		}
		if cur.State != job.StateRunning || cur.Attempt != l.rec.Attempt || cur.Worker != l.rec.Worker {
			l.lost = cur
			return errLost
		}
		l.rec = cur
	}
	return fmt.Errorf("job %s: %w", l.rec.ID, natsjs.ErrStale)
}

// writeTimeout bounds one record write of the attempt: a heartbeat
// interval, at most opTimeout.
func (l *lease) writeTimeout() time.Duration {
	return min(l.r.cfg.HeartbeatInterval, opTimeout)
}

// progress is the render's per-page callback. It writes a checkpoint (done
// pages, a fresh heartbeat) every CheckpointPercent of the pages or when the
// last write is HeartbeatInterval old, and says when the render must stop:
// the job was lost, or the renderer is being stopped.
func (l *lease) progress(ctx context.Context, done int) error {
	if l.lostTo() != nil {
		return errLost
	}
	select {
	case <-l.r.interrupt:
		return errShutdown
	default:
	}
	l.mu.Lock()
	total := l.rec.Progress.Total
	due := done < total && (done >= l.next || l.r.cfg.Now().Sub(l.lastWrite) >= l.r.cfg.HeartbeatInterval)
	for l.next <= done {
		l.next += l.step
	}
	l.mu.Unlock()
	if !due {
		return nil
	}
	now := l.r.cfg.Now().UTC()
	err := l.update(ctx, func(r *job.Record) error {
		r.Progress = &job.Progress{Done: done, Total: total, Unit: "pages"}
		r.HeartbeatAt = &now
		r.UpdatedAt = now
		return nil
	})
	if errors.Is(err, errLost) {
		return err
	}
	if err != nil {
		// A checkpoint that could not be written is not worth failing the
		// render for; the next one, or the final write, tries again.
		l.r.log.Warn("checkpoint not written", "job_id", l.id, "err", err)
		return nil
	}
	if !l.firstDone {
		l.firstDone = true
		if err := l.r.cfg.Failpoints.Hit(failpoint.RendererMidRender); err != nil {
			return err
		}
	}
	return nil
}

// keepAlive tells the queue and the job record that the attempt is alive
// until ctx ends: InProgress on the work message well within AckWait, and a
// heartbeat on the record when no checkpoint was written for
// HeartbeatInterval (a long final write of a big PDF has no checkpoints).
func (l *lease) keepAlive(ctx context.Context) {
	period := min(l.r.cfg.AckWait/3, l.r.cfg.HeartbeatInterval/2)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = l.msg.InProgress()
		l.mu.Lock()
		due := l.r.cfg.Now().Sub(l.lastWrite) >= l.r.cfg.HeartbeatInterval
		l.mu.Unlock()
		if !due {
			continue
		}
		now := l.r.cfg.Now().UTC()
		err := l.update(ctx, func(r *job.Record) error {
			r.HeartbeatAt = &now
			r.UpdatedAt = now
			return nil
		})
		if err != nil && !errors.Is(err, errLost) && ctx.Err() == nil {
			l.r.log.Warn("heartbeat not written", "job_id", l.id, "err", err)
		}
	}
}

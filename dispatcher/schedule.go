package dispatcher

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// scheduleStore is the scheduled set (natsjs.Schedule): an entry per job
// admitted with a run_at ahead, per minute of its run_at.
type scheduleStore interface {
	Add(ctx context.Context, r *job.Record) error
	AddRenewal(ctx context.Context, r *job.Record, at time.Time) error
	Minutes(ctx context.Context, last int64) ([]int64, error)
	Next(ctx context.Context, minute int64, after uint64) (*natsjs.ScheduleEntry, error)
	Remove(ctx context.Context, seq uint64) error
	Depth(ctx context.Context) (uint64, error)
}

// The waker's pace. It reads the current minute's new entries every tick,
// so a job runs at most a tick after its run_at plus a claim; it lists the
// minutes that hold entries (one stream info) every scheduleRelist, which
// finds an entry the relay added late to a minute already past.
const (
	scheduleRelist = 30 * time.Second
	// wakeBatch bounds the entries one tick reads: a backlog of due
	// entries (after an outage) is worked off a batch at a time, never
	// held in memory whole.
	wakeBatch = 1000
	// wakers is how many due jobs are woken at once.
	wakers = 16
)

// waker moves the scheduled jobs whose run_at has come to queued. Its
// memory is the entries of the current minute not yet due, the entries
// whose wake failed (tried again next tick) and a read position per minute
// in play; never the scheduled set. Every dispatcher runs one: each wake
// is a compare-and-set on the record, so two wakers never both move a job.
type waker struct {
	d        *Dispatcher
	store    scheduleStore
	next     map[int64]uint64 // minute → last sequence read
	pending  []natsjs.ScheduleEntry
	listedAt time.Time
}

// startWaker runs the waker's ticks until runCtx ends.
func (d *Dispatcher) startWaker(_, runCtx context.Context) (func(), error) {
	w := &waker{d: d, store: d.schedule, next: map[int64]uint64{}}
	d.spawn(func() {
		t := time.NewTicker(d.cfg.ScheduleTick)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				w.tick(runCtx)
			}
		}
	})
	return func() {}, nil
}

// tick wakes the jobs due now: those of the pending entries, then those of
// the entries stored since the last read, minute by minute, oldest first.
func (w *waker) tick(ctx context.Context) {
	now := w.d.cfg.Now()
	cur := natsjs.ScheduleMinute(now)
	if now.Sub(w.listedAt) >= scheduleRelist {
		octx, cancel := opCtx(ctx)
		minutes, err := w.store.Minutes(octx, cur)
		cancel()
		if err != nil {
			w.d.log.Warn("scheduler: could not list the scheduled minutes", "err", err)
		} else {
			w.listedAt = now
			for _, m := range minutes {
				if _, ok := w.next[m]; !ok {
					w.next[m] = 0
				}
			}
			if w.d.cfg.Metrics != nil {
				octx, cancel := opCtx(ctx)
				if n, err := w.store.Depth(octx); err == nil {
					w.d.cfg.Metrics.SetScheduledDepth(n)
				}
				cancel()
			}
		}
	}
	if _, ok := w.next[cur]; !ok {
		w.next[cur] = 0
	}
	var due []natsjs.ScheduleEntry
	keep := w.pending[:0]
	for _, e := range w.pending {
		if e.RunAt.After(now) {
			keep = append(keep, e)
		} else {
			due = append(due, e)
		}
	}
	w.pending = keep
	minutes := make([]int64, 0, len(w.next))
	for m := range w.next {
		minutes = append(minutes, m)
	}
	sort.Slice(minutes, func(i, j int) bool { return minutes[i] < minutes[j] })
	for _, m := range minutes {
		if m > cur || len(due) >= wakeBatch {
			break
		}
		done := w.read(ctx, m, now, &due)
		if done && m < cur {
			delete(w.next, m) // read to its end; the relist finds a late entry
		}
	}
	w.wakeAll(ctx, due, now)
}

// read appends minute m's entries stored after its read position to due
// (or to pending, when not due yet), up to wakeBatch in all. It reports
// whether it read to the minute's end.
func (w *waker) read(ctx context.Context, m int64, now time.Time, due *[]natsjs.ScheduleEntry) bool {
	for len(*due) < wakeBatch {
		octx, cancel := opCtx(ctx)
		e, err := w.store.Next(octx, m, w.next[m])
		cancel()
		if err != nil {
			w.d.log.Warn("scheduler: could not read a scheduled minute", "minute", m, "err", err)
			return false
		}
		if e == nil {
			return true
		}
		w.next[m] = e.Seq
		if e.Key != "" && e.RunAt.After(now) {
			w.pending = append(w.pending, *e)
			continue
		}
		*due = append(*due, *e)
	}
	return false
}

// wakeAll wakes the due entries' jobs, wakers at a time; an entry whose
// wake failed is tried again next tick.
func (w *waker) wakeAll(ctx context.Context, due []natsjs.ScheduleEntry, now time.Time) {
	if len(due) == 0 {
		return
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, wakers)
	for _, e := range due {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(e natsjs.ScheduleEntry) {
			defer func() { <-sem; wg.Done() }()
			if again, ok := w.d.wake(ctx, e, now); !ok {
				mu.Lock()
				w.pending = append(w.pending, again)
				mu.Unlock()
			}
		}(e)
	}
	wg.Wait()
}

// wake settles one due entry: its job, still scheduled, becomes queued (or
// canceled deadline_exceeded when its start_by passed meanwhile, after an
// outage), and the entry is removed. It reports false, with the entry to
// keep, when it must be tried again.
func (d *Dispatcher) wake(ctx context.Context, e natsjs.ScheduleEntry, now time.Time) (natsjs.ScheduleEntry, bool) {
	octx, cancel := opCtx(ctx)
	defer cancel()
	if e.Key == "" {
		return e, d.removeEntry(octx, e)
	}
	cur, err := d.jobs.Get(octx, e.Key)
	switch {
	case errors.Is(err, job.ErrNotFound):
		return e, d.removeEntry(octx, e)
	case err != nil:
		d.log.Warn("scheduler: could not read job", "key", e.Key, "err", err)
		return e, false
	}
	if cur.State != job.StateScheduled {
		return e, d.removeEntry(octx, e) // run now, canceled, or woken by another dispatcher
	}
	if e.Renew {
		return e, d.renew(octx, e, cur)
	}
	if cur.RunAt != nil && cur.RunAt.After(now) {
		// An entry ahead of its record (the record of an earlier job under
		// the same id): wait for the record's own run_at.
		e.RunAt = *cur.RunAt
		return e, false
	}
	next := cur.Clone()
	now = d.cfg.Now().UTC()
	state := "queued"
	if next.MissedStart(now) {
		state = "canceled"
		err = next.CancelDeadline(now)
	} else {
		err = next.Due(now)
	}
	if err != nil {
		return e, d.removeEntry(octx, e)
	}
	if err := d.jobs.Update(octx, next); err != nil {
		if !errors.Is(err, natsjs.ErrStale) {
			d.log.Warn("scheduler: could not wake job", "job_id", cur.ID, "err", err)
		}
		return e, false // a lost race is read again: the winner's version settles it
	}
	if cur.RunAt != nil {
		d.cfg.Metrics.ScheduleLateness(now.Sub(*cur.RunAt))
	}
	d.log.Debug("scheduled job due", "job_id", next.ID, "state", state)
	// The writer publishes its event; a queued job's work follows it, as
	// the relay would publish it (the same message: de-duplicated).
	if _, err := d.events.Publish(octx, next); err != nil {
		d.log.Debug("event left to the relay", "job_id", next.ID, "err", err)
	} else if next.State == job.StateQueued {
		if err := d.work.Publish(octx, next, 0); err != nil {
			d.log.Debug("work left to the relay", "job_id", next.ID, "err", err)
		}
	}
	return e, d.removeEntry(octx, e)
}

// renew writes a scheduled job's record again, unchanged but for its
// updated_at, so that the record bucket, which drops a record its
// retention after its last write, keeps it until its run_at; the relay
// then adds the job's entry again (the stream drops entries as old as the
// retention too) and, while the run_at is still more than half a
// retention away, the next renewal. The write is a change: it has its
// event, as every stored change does. It reports whether the entry is
// settled.
func (d *Dispatcher) renew(ctx context.Context, e natsjs.ScheduleEntry, cur *job.Record) bool {
	next := cur.Clone()
	next.UpdatedAt = d.cfg.Now().UTC()
	if err := d.jobs.Update(ctx, next); err != nil {
		if !errors.Is(err, natsjs.ErrStale) {
			d.log.Warn("scheduler: could not renew a scheduled job's record", "job_id", cur.ID, "err", err)
		}
		return false
	}
	if _, err := d.events.Publish(ctx, next); err != nil {
		d.log.Debug("event left to the relay", "job_id", next.ID, "err", err)
	}
	return d.removeEntry(ctx, e)
}

// removeEntry deletes a settled entry; it reports whether it is gone (one
// left is read, and found settled, again).
func (d *Dispatcher) removeEntry(ctx context.Context, e natsjs.ScheduleEntry) bool {
	if err := d.schedule.Remove(ctx, e.Seq); err != nil {
		d.log.Warn("scheduler: could not remove a settled entry", "seq", e.Seq, "err", err)
		return false
	}
	return true
}

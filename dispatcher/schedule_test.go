package dispatcher

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// scheduled edits a fixture into a job admitted scheduled for runAt.
func scheduled(runAt time.Time, startBy *time.Time) func(r *job.Record) {
	return func(r *job.Record) {
		at := runAt.UTC()
		r.State, r.RunAt, r.StartBy = job.StateScheduled, &at, startBy
	}
}

// startRecorder runs a permit_report worker that notes when each job's
// attempt started.
func startRecorder(t *testing.T, b *testBundle) *sync.Map {
	t.Helper()
	starts := &sync.Map{}
	conn := b.env.Connect(t, "worker")
	w, err := worker.New(worker.Config{Conn: conn.NC, Name: "w", Credential: wire.JobgateCredential, PullWait: time.Second, NewcomerSlots: -1})
	require.NoError(t, err)
	type params struct {
		CaseID   int `json:"case_id"`
		Revision int `json:"revision"`
		Pages    int `json:"pages"`
	}
	require.NoError(t, worker.Register(w, worker.Type[params]{Name: "permit_report", Concurrency: 4,
		Schema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["case_id","revision"],` +
			`"properties":{"case_id":{"type":"integer","minimum":1},"revision":{"type":"integer","minimum":1},` +
			`"pages":{"type":"integer","minimum":1,"maximum":2000,"default":10}}}`),
		Work: func(_ context.Context, j *worker.Job[params]) error {
			starts.LoadOrStore(j.ID, time.Now())
			_, err := j.Output().Write([]byte("%PDF-1.4 scheduled"))
			return err
		}}))
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return starts
}

// A job scheduled 2 s ahead stays scheduled, with no work and no attempt,
// until its run_at; an attempt starts within 2 s after it. Its events are
// scheduled, queued, running, succeeded: one per change.
func TestAScheduledJobStartsAtItsRunAtAndNotBefore(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.RenderTimeout = time.Minute })
	starts := startRecorder(t, b)
	runAt := time.Now().Add(2 * time.Second)
	rec := b.put(t, "scheduled-2s", scheduled(runAt, nil))

	for time.Now().Before(runAt.Add(-100 * time.Millisecond)) {
		_, started := starts.Load(rec.ID)
		require.False(t, started, "an attempt started %s before its run_at", time.Until(runAt))
		require.Empty(t, b.workIDs(t, rec), "work queued before its run_at")
		time.Sleep(50 * time.Millisecond)
	}
	done := jobtest.Terminal(t, b.conn.Res, rec.Key(), 20*time.Second)
	require.Equal(t, job.StateSucceeded, done.State)
	v, ok := starts.Load(rec.ID)
	require.True(t, ok)
	started := v.(time.Time)
	require.False(t, started.Before(runAt), "started %s before its run_at", runAt.Sub(started))
	require.Less(t, started.Sub(runAt), 2*time.Second, "started within 2 s of its run_at")
	require.Equal(t, runAt.UTC(), done.RunAt.UTC(), "the record keeps its run_at")

	events := jobtest.Events(t, b.conn.Res, rec)
	require.Equal(t, []job.State{job.StateScheduled, job.StateQueued, job.StateRunning, job.StateSucceeded}, jobtest.States(events))
	require.Equal(t, runAt.UTC().Format(time.RFC3339Nano), events[0].Resource.RunAt.UTC().Format(time.RFC3339Nano), "the event shows run_at")
	jobtest.RequireOneIDPerRevision(t, done, events)
	// The woken entry is deleted: nothing of the job stays in the scheduled set.
	waitDepth(t, b, 0)
}

// The scheduled set is stored: a dispatcher stopped before a job's run_at
// and one started after it lose no job, and start none early; no dispatcher
// keeps scheduled jobs in its sweeper's memory.
func TestScheduledJobsSurviveARestart(t *testing.T) {
	t.Parallel()
	d, b := setup(t)
	soon, later := time.Now().Add(1500*time.Millisecond), time.Now().Add(5*time.Second)
	a := b.put(t, "restart-soon", scheduled(soon, nil))
	c := b.put(t, "restart-later", scheduled(later, nil))
	waitDepth(t, b, 2) // both entries stored by the relay
	require.Zero(t, d.running.len(), "scheduled jobs cost the sweeper no memory")
	require.NoError(t, d.Stop(context.Background()))

	// Nothing runs them while no dispatcher runs.
	for time.Now().Before(soon.Add(500 * time.Millisecond)) {
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, job.StateScheduled, get(t, b, a).State)

	restarted := time.Now()
	b.start(t, "dispatcher-b")
	woken := jobtest.WaitFor(t, b.conn.Res, a.Key(), 10*time.Second, func(r *job.Record) bool { return r.State != job.StateScheduled })
	require.Equal(t, job.StateQueued, woken.State)
	require.Less(t, time.Since(restarted), 2*time.Second, "the overdue job was queued at once")
	require.Eventually(t, func() bool { return len(b.workIDs(t, woken)) > 0 }, 5*time.Second, 20*time.Millisecond, "with its work")

	for time.Now().Before(later.Add(-200 * time.Millisecond)) {
		require.Equal(t, job.StateScheduled, get(t, b, c).State, "the later job was woken %s early", time.Until(later))
		time.Sleep(50 * time.Millisecond)
	}
	woken = jobtest.WaitFor(t, b.conn.Res, c.Key(), 10*time.Second, func(r *job.Record) bool { return r.State != job.StateScheduled })
	require.Equal(t, job.StateQueued, woken.State)
	require.False(t, woken.UpdatedAt.Before(later), "queued at %s, before its run_at %s", woken.UpdatedAt, later)
	require.Less(t, woken.UpdatedAt.Sub(later), 2*time.Second)
}

// A job not started by its start_by is canceled deadline_exceeded, with an
// event: a scheduled one when it comes due past it, a queued one by the
// sweeper.
func TestAJobNotStartedByItsStartByIsCanceled(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	runAt := time.Now().Add(time.Second)
	late := b.put(t, "deadline-scheduled", scheduled(runAt, &runAt))
	startBy := time.Now().Add(500 * time.Millisecond).UTC()
	queued := b.put(t, "deadline-queued", func(r *job.Record) { r.StartBy = &startBy })

	for _, rec := range []*job.Record{late, queued} {
		done := jobtest.Terminal(t, b.conn.Res, rec.Key(), 10*time.Second)
		require.Equal(t, job.StateCanceled, done.State, rec.ID)
		require.Equal(t, job.CategoryDeadline, done.Error.Category)
		require.Zero(t, done.Attempt, "no attempt started")
		res := done.Resource("", time.Time{})
		require.Equal(t, job.CategoryDeadline, res.Error.Category, "the resource shows why")
		require.Eventually(t, func() bool {
			states := jobtest.States(jobtest.Events(t, b.conn.Res, rec))
			return len(states) > 0 && states[len(states)-1] == job.StateCanceled
		}, 10*time.Second, 20*time.Millisecond, "the cancel is announced")
	}
}

func get(t *testing.T, b *testBundle, rec *job.Record) *job.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := b.conn.Res.Jobs.Get(ctx, rec.Key())
	require.NoError(t, err)
	return r
}

// waitDepth waits until the scheduled set holds n entries.
func waitDepth(t *testing.T, b *testBundle, n uint64) {
	t.Helper()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d, err := b.conn.Res.Schedule.Depth(ctx)
		return err == nil && d == n
	}, 10*time.Second, 20*time.Millisecond, "the scheduled set never held %d entries", n)
}

// No attempt starts past a job's start_by, even when its work reaches a
// free worker before any sweep: the broker refuses the claim and the
// sweeper cancels the job deadline_exceeded.
func TestNoAttemptStartsPastItsStartBy(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.SweepInterval = 2 * time.Second; c.RenderTimeout = time.Minute })
	starts := startRecorder(t, b)
	startBy := time.Now().Add(-time.Second).UTC()
	rec := b.put(t, "past-start-by", func(r *job.Record) { r.StartBy = &startBy })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, b.conn.Res.Work.Publish(ctx, rec, 0)) // as the gateway's admission does

	done := jobtest.Terminal(t, b.conn.Res, rec.Key(), 10*time.Second)
	require.Equal(t, job.StateCanceled, done.State)
	require.Equal(t, job.CategoryDeadline, done.Error.Category)
	_, started := starts.Load(rec.ID)
	require.False(t, started, "an attempt started past its start_by")
	require.Zero(t, done.Attempt)
}

// A job scheduled further ahead than half the job retention has its record
// written again every half retention, so the record bucket (which drops a
// record its retention after its last write) keeps it until its run_at:
// here a 4 s retention and a run_at 5 s ahead, two renewals, each a change
// with its event, then queued.
func TestALongWaitRenewsTheRecord(t *testing.T) {
	t.Parallel()
	_, b := setup(t, func(c *Config) { c.JobTTL = 4 * time.Second })
	runAt := time.Now().Add(5 * time.Second)
	rec := b.put(t, "renewed", scheduled(runAt, nil))
	h := jobtest.Watch(t, b.conn.Res, rec.Key())
	woken := jobtest.WaitFor(t, b.conn.Res, rec.Key(), 15*time.Second, func(r *job.Record) bool { return r.State != job.StateScheduled })
	require.Equal(t, job.StateQueued, woken.State)
	require.Eventually(t, func() bool { return h.Find(func(r *job.Record) bool { return r.State == job.StateQueued }) != nil },
		5*time.Second, 20*time.Millisecond)

	var writes []time.Time
	for _, r := range h.All() {
		if r.State == job.StateScheduled {
			writes = append(writes, r.UpdatedAt)
		}
	}
	require.Len(t, writes, 3, "admitted, then renewed twice")
	for i := 1; i < len(writes); i++ {
		require.Less(t, writes[i].Sub(writes[i-1]), 3*time.Second, "renewed within half the retention (and a tick)")
	}
	require.Less(t, runAt.Sub(writes[len(writes)-1]), 2*time.Second+500*time.Millisecond)
	// Every change has its event: three scheduled (the admission and two
	// renewals), then queued (the 4 s retention then expires the job).
	var events []jobtest.Event
	require.Eventually(t, func() bool {
		events = jobtest.Events(t, b.conn.Res, woken)
		return len(events) >= 4
	}, 10*time.Second, 20*time.Millisecond, "an event per change")
	events = events[:4]
	var states []job.State
	for _, e := range events {
		states = append(states, e.Resource.State)
	}
	require.Equal(t, []job.State{job.StateScheduled, job.StateScheduled, job.StateScheduled, job.StateQueued}, states)
	jobtest.RequireOneIDPerRevision(t, woken, events)
}

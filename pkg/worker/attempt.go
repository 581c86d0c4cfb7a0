package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/retry"
	"github.com/jobgate/jobgate/pkg/job"
)

// errStoreOutage: the result could not be stored because JetStream was
// unavailable; the attempt reached no verdict.
var errStoreOutage = errors.New("result store unavailable")

// errAttemptTimeout is the cause of an attempt context whose budget ran out.
var errAttemptTimeout = errors.New("attempt time budget exhausted")

// attempt is one attempt's hold on a job: the record as this attempt last
// wrote it, its progress and its output. Every record write of the attempt
// goes through it, serialized, as a compare-and-set; a write that finds the
// job canceled, finished or claimed by another attempt marks it lost and
// ends the handler's context.
type attempt struct {
	w           *Workers
	t           *typeRunner
	msg         *natsjs.WorkMsg
	log         *slog.Logger
	rec         *job.Record // as claimed; the handler's view
	maxAttempts int
	stopHandler context.CancelCauseFunc
	// uploadBy bounds the result upload: the attempt's budget plus the
	// time to store what was written at its last moment.
	uploadBy time.Time

	mu        sync.Mutex
	cur       *job.Record // as last written
	lastWrite time.Time
	lost      *job.Record
	prog      *job.Progress // as last reported by the handler
	written   *job.Progress // as last written
	nextStep  int
	kick      chan struct{}

	outOnce sync.Once
	out     *resultWriter

	// eventSeq is the stream sequence of the job's newest event as this
	// attempt knows it (its own last one), 0 when unknown: the next event
	// is stored only if none came after it (natsjs.EventStream.PublishAfter).
	eventSeq atomic.Uint64
}

func (w *Workers) newAttempt(t *typeRunner, msg *natsjs.WorkMsg, rec *job.Record) *attempt {
	return &attempt{
		w: w, t: t, msg: msg, rec: rec.Clone(), cur: rec, lastWrite: w.cfg.Now(),
		maxAttempts: rec.AttemptsOr(t.decl.Attempts), kick: make(chan struct{}, 1),
		log: w.log.With("job_id", rec.ID, "type", rec.Type, "attempt", rec.Attempt),
	}
}

// handle processes one delivery of a work message.
func (w *Workers) handle(t *typeRunner, msg *natsjs.WorkMsg) {
	if msg.Key == "" {
		w.log.Warn("work message names no job", "type", t.decl.Name)
		_ = msg.Term("not a job")
		return
	}
	ctx, cancel := context.WithTimeout(w.hardCtx, opTimeout)
	defer cancel()
	c := w.claim(ctx, t, msg.Key, msg.Delivered)
	switch c.verdict {
	case verdictAck:
		w.log.Debug("work acknowledged without running", "key", msg.Key, "why", c.why)
		_ = msg.Ack()
		return
	case verdictNak:
		w.log.Debug("work returned to the queue", "key", msg.Key, "why", c.why, "delay", c.delay)
		_ = msg.Nak(c.delay)
		return
	case verdictTerm:
		w.log.Warn("work dropped", "key", msg.Key, "why", c.why)
		_ = msg.Term(c.why)
		return
	case verdictExhaust:
		w.exhaust(ctx, t, msg)
		return
	}
	release, ok := w.track(msg.Key)
	if !ok {
		w.log.Debug("work acknowledged without running", "key", msg.Key, "why", "job running here")
		_ = msg.Ack()
		return
	}
	defer release()
	seq := w.publishEvent(c.rec, 0)
	w.log.Info("job claimed", "job_id", c.rec.ID, "type", c.rec.Type, "attempt", c.rec.Attempt, "delivery", msg.Delivered)
	w.run(t, msg, c.rec, seq)
}

// run is one attempt: the handler within the budget while the claim is kept
// alive, the output stored, the job finished; or what went wrong concluded.
func (w *Workers) run(t *typeRunner, msg *natsjs.WorkMsg, rec *job.Record, eventSeq uint64) {
	a := w.newAttempt(t, msg, rec)
	a.eventSeq.Store(eventSeq)
	timeout := rec.TimeoutOr(t.decl.Timeout())
	actx, cancelAttempt := context.WithTimeoutCause(w.hardCtx, timeout, errAttemptTimeout)
	defer cancelAttempt()
	hctx, stopHandler := context.WithCancelCause(actx)
	defer stopHandler(nil)
	a.stopHandler = stopHandler
	a.uploadBy = time.Now().Add(timeout + opTimeout) // a real deadline, whatever the clock

	keepCtx, stopKeep := context.WithCancel(context.Background())
	var kwg sync.WaitGroup
	kwg.Add(1)
	go func() { defer kwg.Done(); a.keepAlive(keepCtx) }()
	stopKeeper := sync.OnceFunc(func() { stopKeep(); kwg.Wait() })
	defer stopKeeper()

	started := w.cfg.Now()
	err := a.runHandler(hctx)
	if err == nil {
		err = a.finishOutput()
	} else {
		a.abortOutput(err)
	}
	stopKeeper()
	if err == nil {
		err = untilAvailable(actx, a.succeed)
	}
	ctx, cancelOp := context.WithTimeout(context.WithoutCancel(w.hardCtx), opTimeout)
	defer cancelOp()
	if err == nil {
		_ = msg.Ack()
		done := a.record()
		a.publish(done)
		w.observe(t, "succeeded", started)
		size := int64(0)
		if done.Output != nil {
			size = done.Output.Size
		}
		a.log.Info("job succeeded", "size", size)
		return
	}
	cerr := a.classify(err, actx, hctx)
	w.conclude(ctx, a, cerr, started)
}

// runHandler calls the type's handler, turning a panic into a permanent
// failure instead of a crashed process.
func (a *attempt) runHandler(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			a.log.Error("handler panicked", "panic", fmt.Sprint(p))
			err = &failure{category: job.CategoryRenderError, message: fmt.Sprintf("the worker failed: %v", p)}
		}
	}()
	return a.t.run(ctx, a)
}

// classify turns what ended an attempt into a failure, or into errLost or
// errShutdown when it reached no verdict.
func (a *attempt) classify(err error, attemptCtx, handlerCtx context.Context) error {
	var f *failure
	cause := context.Cause(handlerCtx)
	switch {
	case a.lostTo() != nil || errors.Is(err, errLost) || errors.Is(cause, errLost):
		return errLost
	case errors.Is(cause, errShutdown) || errors.Is(err, errShutdown) || a.w.hardCtx.Err() != nil:
		return errShutdown
	case a.storeUnavailable():
		// The result store could not be reached: that says nothing about
		// the job. It goes back to the queue like a job of a stopping
		// worker, after a pause, instead of failing.
		return errStoreOutage
	case a.out != nil && a.out.tooLarge:
		return &failure{category: job.CategoryBudgetExceeded, err: err,
			message: fmt.Sprintf("the result would be larger than the limit of %d bytes", a.t.decl.MaxResultBytes)}
	case errors.As(err, &f):
		return f
	case errors.Is(context.Cause(attemptCtx), errAttemptTimeout):
		return &failure{category: job.CategoryTimeout, retryable: true, err: err,
			message: fmt.Sprintf("the attempt did not finish within its time budget of %s", a.rec.TimeoutOr(a.t.decl.Timeout()))}
	}
	msg := err.Error()
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	return &failure{category: job.CategoryRenderError, retryable: true, err: err, message: msg}
}

// conclude settles an attempt that produced no result.
func (w *Workers) conclude(ctx context.Context, a *attempt, err error, started time.Time) {
	rec := a.record()
	msg := a.msg
	var f *failure
	switch {
	case errors.Is(err, errLost):
		w.observe(a.t, "lost", started)
		lost := a.lostTo()
		// A result this attempt stored belongs to no one, unless the record
		// it lost to is its own success whose acknowledgement was lost (the
		// write went through, its answer did not): then it is the result.
		ours := lost != nil && lost.Output != nil && a.out != nil && lost.Output.Object == a.out.object
		if a.out != nil && a.out.err == nil && !ours {
			if err := w.res.DeleteResult(ctx, a.out.object); err != nil {
				a.log.Warn("could not delete orphaned result", "err", err)
			}
		}
		if lost == nil || lost.State.Terminal() {
			a.log.Info("job ended elsewhere, stopping")
			_ = msg.Ack()
			return
		}
		// Another worker took the job over, perhaps through this very
		// message: leave it unacknowledged, so it stays that worker's.
		a.log.Info("job taken over, stopping", "by", lost.Worker)
	case errors.Is(err, errStoreOutage):
		w.observe(a.t, "given_back", started)
		// The job goes back to the queue; the attempt stays counted (attempt
		// numbers never go backwards for a reader) but given back, so an
		// outage uses up none of the job's attempts.
		err := a.update(ctx, func(n *job.Record) error { return n.GiveBack(w.cfg.Now()) })
		if err != nil {
			a.log.Warn("could not give back job after a result store outage", "err", err)
			return
		}
		a.log.Warn("result store unavailable, job given back", "cause", a.out.err)
		a.publish(a.record())
		_ = msg.Nak(outageDelay(msg.Delivered))
	case errors.Is(err, errShutdown):
		w.observe(a.t, "given_back", started)
		err := a.update(ctx, func(n *job.Record) error { return n.GiveBack(w.cfg.Now()) })
		if err != nil {
			// The record still names this worker; the message comes back
			// after AckWait and the next worker takes the job over.
			a.log.Warn("could not give back job on shutdown", "err", err)
			return
		}
		a.log.Info("job given back on shutdown")
		a.publish(a.record())
		_ = msg.Nak(0)
	case errors.As(err, &f) && f.retryable && rec.AttemptsUsed() < a.maxAttempts:
		w.observe(a.t, "retry", started)
		delay := w.retryDelay(rec.Attempt)
		now := w.cfg.Now()
		err := a.update(ctx, func(n *job.Record) error { return n.ScheduleRetry(f.record(), now.Add(delay), now) })
		if errors.Is(err, errLost) {
			w.conclude(ctx, a, err, started)
			return
		}
		if err != nil {
			a.log.Warn("could not schedule retry", "err", err)
			return
		}
		a.log.Info("attempt failed, retry scheduled", "category", f.category, "retry_in", delay, "cause", f.err)
		a.publish(a.record())
		_ = msg.Nak(delay)
	case errors.As(err, &f):
		w.observe(a.t, "failed", started)
		failed := f.record()
		if f.retryable {
			failed.Message = fmt.Sprintf("%s (attempt %d of %d)", failed.Message, rec.Attempt, a.maxAttempts)
		}
		err := a.update(ctx, func(n *job.Record) error { return n.Fail(failed, w.cfg.Now()) })
		if errors.Is(err, errLost) {
			w.conclude(ctx, a, err, started)
			return
		}
		if err != nil {
			a.log.Warn("could not record failure", "err", err)
			return
		}
		a.log.Info("job failed", "category", f.category, "cause", f.err)
		a.publish(a.record())
		_ = msg.Ack()
	default:
		a.log.Error("unexpected attempt outcome", "err", err)
	}
}

// retryDelay is the pause before the attempt after attempt n: RetryBase
// doubled per attempt, at most 10 minutes, jittered.
func (w *Workers) retryDelay(n int) time.Duration {
	return jitter(retry.Exponential(w.cfg.RetryBase, max(10*time.Minute, w.cfg.RetryBase), max(n, 1)-1))
}

func (w *Workers) observe(t *typeRunner, outcome string, started time.Time) {
	if w.cfg.OnAttempt != nil {
		w.cfg.OnAttempt(t.decl.Name, outcome, w.cfg.Now().Sub(started))
	}
}

// publishEvent publishes a change this worker wrote (the writer of a
// change announces it; the relay only fills in for a writer that crashed),
// only while no event of a later change is stored: a worker that froze
// after its write, past the stale limit, finds the events of the worker
// that took the job over and leaves its own out. after is the job's newest
// event's sequence as the caller knows it (0: unknown, read it); the
// result is that sequence after the publish (0 when it failed).
func (w *Workers) publishEvent(rec *job.Record, after uint64) uint64 {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.hardCtx), opTimeout)
	defer cancel()
	seq, stored, err := w.res.Events.PublishAfter(ctx, rec, after)
	if err != nil {
		w.log.Debug("event not published", "job_id", rec.ID, "err", err)
		return 0
	}
	if !stored {
		w.log.Debug("event left out: the job has a newer one", "job_id", rec.ID, "revision", rec.Revision)
	}
	return seq
}

// publish publishes the event of a change this attempt wrote, after the
// attempt's previous event.
func (a *attempt) publish(rec *job.Record) {
	a.eventSeq.Store(a.w.publishEvent(rec, a.eventSeq.Load()))
}

// record returns the record as last written by this attempt.
func (a *attempt) record() *job.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur.Clone()
}

// lostTo returns the record that took the job away, or nil.
func (a *attempt) lostTo() *job.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lost
}

// update applies fn to the attempt's record and writes it by compare-and-
// set. A lost race against a write that left the job this attempt's is
// retried on the fresh record; any other outcome of the re-read marks the
// attempt lost, ends the handler's context and returns errLost.
func (a *attempt) update(ctx context.Context, fn func(r *job.Record) error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lost != nil {
		return errLost
	}
	for range 5 {
		next := a.cur.Clone()
		if err := fn(next); err != nil {
			return err
		}
		// Each write has its own short deadline: a write lost with a
		// cluster node is never answered, and waiting for it would hold
		// a.mu and so stop the heartbeats.
		wctx, cancel := context.WithTimeout(ctx, a.writeTimeout())
		err := a.w.res.Jobs.Update(wctx, next)
		cancel()
		if err == nil {
			a.cur = next
			a.lastWrite = a.w.cfg.Now()
			return nil
		}
		if !errors.Is(err, natsjs.ErrStale) {
			return err
		}
		gctx, cancel := context.WithTimeout(ctx, a.writeTimeout())
		cur, gerr := a.w.res.Jobs.Get(gctx, a.cur.Key())
		cancel()
		if gerr != nil {
			if errors.Is(gerr, job.ErrNotFound) {
				return a.loseLocked(a.cur.Clone())
			}
			return gerr
		}
		if cur.State != job.StateRunning || cur.Attempt != a.cur.Attempt || cur.Worker != a.cur.Worker {
			return a.loseLocked(cur)
		}
		a.cur = cur
	}
	return fmt.Errorf("job %s: %w", a.cur.ID, natsjs.ErrStale)
}

func (a *attempt) loseLocked(by *job.Record) error {
	a.lost = by
	if a.stopHandler != nil {
		a.stopHandler(errLost)
	}
	return errLost
}

// writeTimeout bounds one record write of the attempt: a heartbeat
// interval, at least 2s (a loaded machine answers slowly, and a write given
// up on is a write to do again), at most opTimeout.
func (a *attempt) writeTimeout() time.Duration {
	return min(max(a.w.cfg.HeartbeatInterval, 2*time.Second), opTimeout)
}

// succeed records the result and moves the job to succeeded.
func (a *attempt) succeed(ctx context.Context) error {
	var out *job.Output
	if a.out != nil {
		out = &job.Output{Object: a.out.object, ContentType: a.t.decl.ContentType, Size: a.out.n,
			SHA256: hex.EncodeToString(a.out.h.Sum(nil))}
	}
	a.mu.Lock()
	prog := a.prog
	a.mu.Unlock()
	return a.update(ctx, func(n *job.Record) error {
		if prog != nil {
			p := *prog
			n.Progress = &p
		}
		return n.Succeed(out, a.w.cfg.Now())
	})
}

// setProgress records the handler's latest progress and asks for a
// checkpoint when it crossed a tenth of the total.
func (a *attempt) setProgress(done, total int, unit string) {
	if len(unit) > 32 {
		unit = unit[:32]
	}
	done, total = max(done, 0), max(total, 0)
	a.mu.Lock()
	a.prog = &job.Progress{Done: done, Total: total, Unit: unit}
	due := total > 0 && done >= a.nextStep
	if due {
		step := max(1, total/10)
		a.nextStep = (done/step + 1) * step
	}
	a.mu.Unlock()
	if due {
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
}

// keepAlive tells the queue and the job record that the attempt is alive
// until ctx ends: InProgress on the work message well within AckWait, a
// checkpoint when progress asks for one, and a heartbeat on the record when
// nothing was written for HeartbeatInterval. When the worker is told to
// stop (its drain ran out) it ends the handler.
func (a *attempt) keepAlive(ctx context.Context) {
	cfg := a.w.cfg
	t := time.NewTicker(min(cfg.AckWait/3, cfg.HeartbeatInterval/2))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.w.interrupt:
			a.stopHandler(errShutdown)
			<-ctx.Done()
			return
		case <-a.kick:
			a.checkpoint(ctx, true)
		case <-t.C:
			_ = a.msg.InProgress()
			a.mu.Lock()
			due := cfg.Now().Sub(a.lastWrite) >= cfg.HeartbeatInterval
			a.mu.Unlock()
			if due {
				a.checkpoint(ctx, false)
			}
		}
	}
}

// checkpoint writes the latest progress (or, with none new, a heartbeat)
// and publishes the change when progress moved.
func (a *attempt) checkpoint(ctx context.Context, onlyProgress bool) {
	a.mu.Lock()
	prog, written := a.prog, a.written
	a.mu.Unlock()
	moved := prog != nil && (written == nil || *prog != *written)
	if onlyProgress && !moved {
		return
	}
	now := a.w.cfg.Now()
	err := a.update(ctx, func(n *job.Record) error {
		if moved {
			n.SetProgress(*prog, now)
		} else {
			n.Heartbeat(now)
		}
		return nil
	})
	switch {
	case err == nil && moved:
		a.mu.Lock()
		a.written = prog
		a.mu.Unlock()
		a.publish(a.record())
	case err != nil && !errors.Is(err, errLost) && ctx.Err() == nil:
		// Not worth failing the attempt for; the next one tries again.
		a.log.Warn("checkpoint not written", "err", err)
	}
}

// output returns the attempt's result writer, starting the upload on first
// use.
func (a *attempt) output() io.Writer {
	a.outOnce.Do(func() {
		pr, pw := io.Pipe()
		rw := &resultWriter{pw: pw, h: sha256.New(), max: a.t.decl.MaxResultBytes, done: make(chan struct{}),
			object: fmt.Sprintf("%s.a%d", a.rec.ID, a.rec.Attempt), kept: &bytes.Buffer{},
			desc: fmt.Sprintf("%s result of job %s, attempt %d", a.rec.Type, a.rec.ID, a.rec.Attempt)}
		go func() {
			defer close(rw.done)
			// Bounded, so finishing or discarding the output never waits on
			// a store that stopped answering; a hard stop ends it at once.
			ctx, cancel := context.WithDeadline(a.w.hardCtx, a.uploadBy)
			defer cancel()
			_, rw.err = a.w.res.PutResult(ctx, rw.object, a.t.decl.ContentType, rw.desc, pr)
			pr.CloseWithError(errOrClosed(rw.err))
		}()
		a.out = rw
	})
	return a.out
}

func errOrClosed(err error) error {
	if err == nil {
		return io.ErrClosedPipe
	}
	return err
}

// storeUnavailable reports an upload that failed because JetStream could
// not be reached (no responders, a timeout, a lost connection).
func (a *attempt) storeUnavailable() bool {
	if a.out == nil {
		return false
	}
	select {
	case <-a.out.done:
	default:
		return false
	}
	return a.out.err != nil && outage(a.out.err)
}

// outage reports an error that says the store could not be reached or did
// not answer in time.
func outage(err error) bool {
	return natsjs.Unavailable(err) || errors.Is(err, job.ErrUnavailable)
}

// finishOutput completes the upload of a handler that succeeded.
func (a *attempt) finishOutput() error {
	if a.out == nil {
		return nil
	}
	_ = a.out.pw.Close()
	<-a.out.done
	if a.out.err != nil && outage(a.out.err) && a.out.kept != nil {
		a.out.err = a.storeAgain()
	}
	if a.out.err != nil {
		return &failure{category: job.CategoryInternal, retryable: true, err: a.out.err,
			message: "the result could not be stored; the job is retried"}
	}
	return nil
}

// storeAgain stores the kept copy of an output whose streamed upload the
// store broke off (a stream leader lost or frozen mid-upload, a connection
// lost): a fresh put of the same object, again while the store is
// unavailable, within the upload's deadline. An outage of a few seconds
// then costs the attempt a few seconds instead of the whole job. A put
// that did store its metadata is replaced whole (the object store removes
// the chunks of the object it replaces), so the attempt leaves one object.
func (a *attempt) storeAgain() error {
	a.log.Info("result upload broken off, storing the result again", "cause", a.out.err)
	ctx, cancel := context.WithDeadline(a.w.hardCtx, a.uploadBy)
	defer cancel()
	tries := 0
	err := untilAvailable(ctx, func(ctx context.Context) error {
		tries++
		_, err := a.w.res.PutResult(ctx, a.out.object, a.t.decl.ContentType, a.out.desc, bytes.NewReader(a.out.kept.Bytes()))
		return err
	})
	if err != nil {
		return err
	}
	a.log.Info("result stored", "tries", tries)
	return nil
}

// abortOutput discards a partial upload.
func (a *attempt) abortOutput(cause error) {
	if a.out == nil {
		return
	}
	_ = a.out.pw.CloseWithError(cause)
	<-a.out.done
}

// keptMax bounds the copy of an output kept for storing it again: a larger
// output whose upload breaks off fails the attempt's upload (the job goes
// back to the queue), as every output did before.
const keptMax = 16 << 20

// resultWriter counts, hashes and streams the output into the upload, and
// keeps a copy of it while it is at most keptMax: when the store breaks the
// upload off, the handler writes on into the copy and finishOutput stores
// it again.
type resultWriter struct {
	pw       *io.PipeWriter
	h        hash.Hash
	n, max   int64
	tooLarge bool
	object   string
	desc     string
	done     chan struct{}
	err      error // of the upload, once done is closed

	kept   *bytes.Buffer // nil once the output outgrew keptMax
	broken error         // the streamed upload's end, when it ended early
}

func (r *resultWriter) Write(p []byte) (int, error) {
	if r.tooLarge || r.n+int64(len(p)) > r.max {
		r.tooLarge = true
		return 0, ErrResultTooLarge
	}
	if r.kept != nil {
		if r.kept.Len()+len(p) > keptMax {
			r.kept = nil
		} else {
			r.kept.Write(p)
		}
	}
	if r.broken == nil {
		n, err := r.pw.Write(p)
		if err != nil {
			r.broken = err
			if r.kept == nil || !outage(err) {
				r.kept = nil
				r.h.Write(p[:n])
				r.n += int64(n)
				return n, err
			}
		}
	} else if r.kept == nil {
		return 0, r.broken
	}
	r.h.Write(p)
	r.n += int64(len(p))
	return len(p), nil
}

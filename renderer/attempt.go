package renderer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/job"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// handle processes one delivery of a work message.
func (r *Renderer) handle(msg jetstream.Msg) {
	md, err := msg.Metadata()
	if err != nil {
		r.log.Warn("work message without metadata", "subject", msg.Subject(), "err", err)
		_ = msg.TermWithReason("not a JetStream message")
		return
	}
	key, ok := workKey(msg)
	if !ok {
		r.log.Warn("work message names no job", "subject", msg.Subject())
		_ = msg.TermWithReason("not a job")
		return
	}
	ctx, cancel := context.WithTimeout(r.hardCtx, opTimeout)
	defer cancel()
	c := r.claim(ctx, key, md)
	switch c.verdict {
	case verdictAck:
		r.log.Debug("work acknowledged without rendering", "key", key, "why", c.why)
		_ = msg.Ack()
		return
	case verdictNak:
		r.log.Debug("work returned to the queue", "key", key, "why", c.why, "delay", c.delay)
		if c.prev != nil && c.prev.State == job.StateRunning {
			r.giveBack(ctx, msg, md, c.prev, c.delay, true)
			return
		}
		_ = msg.NakWithDelay(r.work.NakDelay(c.delay, md.NumDelivered))
		return
	case verdictExhaust:
		r.exhaust(ctx, msg, key)
		return
	}
	if c.prev.State == job.StateQueued {
		r.publishEvent(c.prev)
	}
	r.publishEvent(c.rec)
	r.log.Info("job claimed", "job_id", c.rec.ID, "attempt", c.rec.Attempt, "delivery", md.NumDelivered)
	r.run(msg, md, c.rec)
}

// workKey is the record key a work message names (its data, or failing
// that its subject).
func workKey(msg jetstream.Msg) (string, bool) {
	if t, q, id, ok := natsjs.ScopeOf(string(msg.Data())); ok {
		return job.StoreKey(t, q, id), true
	}
	if t, q, id, ok := natsjs.ScopeOf(msg.Subject()); ok {
		return job.StoreKey(t, q, id), true
	}
	return "", false
}

// run is one attempt: render within the budget while keeping the claim
// alive, store the result, finish the job; or conclude what went wrong.
func (r *Renderer) run(msg jetstream.Msg, md *jetstream.MsgMetadata, rec *job.Record) {
	l := newLease(r, rec, msg)
	actx, cancel := context.WithTimeout(r.hardCtx, r.cfg.RenderTimeout)
	defer cancel()
	keepCtx, stopKeep := context.WithCancel(context.Background())
	var kwg sync.WaitGroup
	kwg.Add(1)
	go func() { defer kwg.Done(); l.keepAlive(keepCtx) }()
	stopKeeper := sync.OnceFunc(func() { stopKeep(); kwg.Wait() })
	defer stopKeeper()

	if r.cfg.OnRender != nil {
		r.cfg.OnRender(rec.Clone())
	}
	started := time.Now()
	err := r.attempt(actx, l)
	stopKeeper()
	if err == nil {
		r.cfg.Metrics.Render("succeeded", time.Since(started))
		_ = msg.Ack()
		done := l.record()
		r.publishEvent(done)
		r.log.Info("job succeeded", "job_id", done.ID, "attempt", done.Attempt, "size", done.Output.Size)
		return
	}
	ctx, cancelOp := context.WithTimeout(context.WithoutCancel(r.hardCtx), opTimeout)
	defer cancelOp()
	cerr := r.classify(err, actx, r.hardCtx)
	r.cfg.Metrics.Render(r.outcome(cerr, l.record()), time.Since(started))
	r.conclude(ctx, msg, md, l, cerr)
}

// outcome names how an attempt without a result ended, for metrics.
func (r *Renderer) outcome(err error, rec *job.Record) string {
	var f *failure
	switch {
	case errors.Is(err, errLost):
		return "lost"
	case errors.Is(err, errShutdown):
		return "given_back"
	case errors.As(err, &f) && f.retryable && rec.Attempt < r.cfg.MaxAttempts:
		return "retry"
	}
	return "failed"
}

// attempt renders the job, stores the result object under the job id and
// moves the job to succeeded.
func (r *Renderer) attempt(ctx context.Context, l *lease) error {
	rec := l.record()
	in, err := r.reportInput(rec)
	if err != nil {
		return err
	}
	buf := &cappedBuffer{max: r.cfg.MaxOutputBytes}
	if err := safeRender(ctx, in, buf, func(done int) error { return l.progress(ctx, done) }); err != nil {
		return err
	}
	data := buf.Bytes()
	sum := sha256.Sum256(data)
	meta := jetstream.ObjectMeta{
		Name:        rec.ID,
		Description: fmt.Sprintf("permit report, case %d, revision %d", in.CaseID, in.Revision),
		Headers:     nats.Header{"Content-Type": []string{ContentTypePDF}},
	}
	// The result is rendered and in memory: while JetStream is unavailable
	// (a cluster node lost, a stream electing its leader) storing it and
	// finishing the job are retried within the attempt's budget instead of
	// failing the attempt, which would render the job again.
	err = untilAvailable(ctx, func(ctx context.Context) error {
		_, err := r.res.Results.Put(ctx, meta, bytes.NewReader(data))
		return err
	})
	if err != nil {
		return fmt.Errorf("store result of %s: %w", rec.ID, err)
	}
	now := r.cfg.Now().UTC()
	return untilAvailable(ctx, func(ctx context.Context) error {
		return l.update(ctx, func(n *job.Record) error {
			if err := n.Transition(job.StateSucceeded, now); err != nil {
				return err
			}
			n.Output = &job.Output{Object: rec.ID, ContentType: ContentTypePDF, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
			n.Progress = &job.Progress{Done: in.Pages, Total: in.Pages, Unit: "pages"}
			n.Error = nil
			n.HeartbeatAt = &now
			return nil
		})
	})
}

// untilAvailable runs op, each try bounded by opTimeout, and again while
// its error says JetStream was unavailable, until ctx ends.
func untilAvailable(ctx context.Context, op func(context.Context) error) error {
	wait := 100 * time.Millisecond
	for {
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		err := op(octx)
		cancel()
		if err == nil || ctx.Err() != nil || !(natsjs.Unavailable(err) || errors.Is(err, job.ErrUnavailable)) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// safeRender renders, turning a panic of the PDF library into a permanent
// render error instead of a crashed process.
func safeRender(ctx context.Context, in ReportInput, buf *cappedBuffer, progress func(int) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = permanent(job.CategoryRenderError, "rendering failed: %v", p)
		}
	}()
	return RenderPermitReport(ctx, in, buf, progress)
}

// conclude settles an attempt that produced no result.
func (r *Renderer) conclude(ctx context.Context, msg jetstream.Msg, md *jetstream.MsgMetadata, l *lease, err error) {
	rec := l.record()
	var f *failure
	switch {
	case errors.Is(err, errLost):
		lost := l.lostTo()
		if lost == nil || lost.State.Terminal() {
			if lost != nil && (lost.State == job.StateCanceled || lost.State == job.StateFailed) {
				// A result this attempt stored belongs to no one.
				r.deleteResult(ctx, rec.ID)
			}
			r.log.Info("job ended elsewhere, stopping", "job_id", rec.ID, "attempt", rec.Attempt)
			_ = msg.Ack()
			return
		}
		// Another renderer took the job over, perhaps through this very
		// message: leave it unacknowledged, so it stays that renderer's.
		r.log.Info("job taken over, stopping", "job_id", rec.ID, "attempt", rec.Attempt, "by", lost.Worker)
	case errors.Is(err, errShutdown):
		now := r.cfg.Now().UTC()
		err := l.update(ctx, func(n *job.Record) error {
			n.Worker = ""
			n.RetryAt = &now
			n.HeartbeatAt = &now
			n.UpdatedAt = now
			return nil
		})
		if err != nil {
			// The record still names this worker; the message comes back
			// after AckWait and the next renderer takes the job over.
			r.log.Warn("could not give back job on shutdown", "job_id", rec.ID, "err", err)
			return
		}
		r.log.Info("job given back on shutdown", "job_id", rec.ID, "attempt", rec.Attempt)
		r.giveBack(ctx, msg, md, l.record(), 0, false)
	case errors.As(err, &f) && f.retryable && rec.Attempt < r.cfg.MaxAttempts:
		delay := r.work.Redelivery(rec.Attempt)
		now := r.cfg.Now().UTC()
		retryAt := now.Add(delay)
		err := l.update(ctx, func(n *job.Record) error {
			n.Worker = ""
			n.RetryAt = &retryAt
			n.HeartbeatAt = &now
			n.UpdatedAt = now
			n.Error = f.record()
			return nil
		})
		if errors.Is(err, errLost) {
			r.conclude(ctx, msg, md, l, err)
			return
		}
		if err != nil {
			r.log.Warn("could not schedule retry", "job_id", rec.ID, "err", err)
			return
		}
		r.log.Info("attempt failed, retry scheduled", "job_id", rec.ID, "attempt", rec.Attempt,
			"category", f.category, "retry_at", retryAt, "cause", f.err)
		r.giveBack(ctx, msg, md, l.record(), delay, false)
	case errors.As(err, &f):
		now := r.cfg.Now().UTC()
		failed := f.record()
		if f.retryable {
			failed.Message = fmt.Sprintf("%s (attempt %d of %d)", failed.Message, rec.Attempt, r.cfg.MaxAttempts)
		}
		err := l.update(ctx, func(n *job.Record) error {
			if err := n.Transition(job.StateFailed, now); err != nil {
				return err
			}
			n.Error = failed
			return nil
		})
		if errors.Is(err, errLost) {
			r.conclude(ctx, msg, md, l, err)
			return
		}
		if err != nil {
			r.log.Warn("could not record failure", "job_id", rec.ID, "err", err)
			return
		}
		r.log.Info("job failed", "job_id", rec.ID, "attempt", rec.Attempt, "category", f.category, "cause", f.err)
		r.publishEvent(l.record())
		if f.retryable {
			_ = msg.Ack()
		} else {
			_ = msg.TermWithReason(f.category)
		}
	default:
		r.log.Error("unexpected render outcome", "job_id", rec.ID, "err", err)
	}
}

// giveBack returns a running job to the queue to be taken up after delay.
// While the message has deliveries left that is a delayed Nak. On its last
// delivery a Nak would exhaust it though attempts remain, so a fresh work
// message is published instead, its generation the revision of the write
// that gave the job back (unique, so never swallowed by de-duplication), and
// this one is acknowledged. touch asks for that write when the caller made
// none.
func (r *Renderer) giveBack(ctx context.Context, msg jetstream.Msg, md *jetstream.MsgMetadata, rec *job.Record, delay time.Duration, touch bool) {
	if md.NumDelivered < uint64(r.cfg.MaxAttempts) {
		_ = msg.NakWithDelay(r.work.NakDelay(delay, md.NumDelivered))
		return
	}
	if touch {
		next := rec.Clone()
		if err := r.res.Jobs.Update(ctx, next); err != nil {
			_ = msg.NakWithDelay(r.work.NakDelay(delay, md.NumDelivered))
			return
		}
		rec = next
	}
	if err := natsjs.PublishWork(ctx, r.res.JS, rec, int(rec.Revision)); err != nil {
		r.log.Warn("could not requeue job", "job_id", rec.ID, "err", err)
		_ = msg.NakWithDelay(r.work.NakDelay(delay, md.NumDelivered))
		return
	}
	_ = msg.Ack()
}

// exhaust fails a job whose attempts ran out without a verdict on the last
// one (its worker vanished, or it was given back).
func (r *Renderer) exhaust(ctx context.Context, msg jetstream.Msg, key string) {
	now := r.cfg.Now().UTC()
	rec, err := r.res.Jobs.Mutate(ctx, key, func(n *job.Record) error {
		if n.State.Terminal() || n.Attempt < r.cfg.MaxAttempts {
			return errLost
		}
		if n.State == job.StateRunning && n.Worker != "" && now.Sub(heartbeat(n)) < r.cfg.StaleAfter {
			return errLost
		}
		f := job.FinalFailure(n, r.cfg.MaxAttempts)
		if err := n.Transition(job.StateFailed, now); err != nil {
			return err
		}
		n.Error = f
		return nil
	})
	switch {
	case errors.Is(err, errLost) || errors.Is(err, job.ErrNotFound):
		_ = msg.Ack()
	case err != nil:
		_ = msg.NakWithDelay(r.work.NakDelay(r.cfg.AckWait/3, 1))
	default:
		r.log.Info("job failed, attempts exhausted", "job_id", rec.ID, "attempt", rec.Attempt, "category", rec.Error.Category)
		r.publishEvent(rec)
		_ = msg.Ack()
	}
}

func (r *Renderer) deleteResult(ctx context.Context, id string) {
	if err := r.res.Results.Delete(ctx, id); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		r.log.Warn("could not delete result object", "job_id", id, "err", err)
	}
}

// publishEvent publishes the job's state change right away. The relay
// derives the same event from the record change log and de-duplication
// makes the second one free; publishing here keeps a state that the next
// write supersedes within milliseconds from going unannounced.
func (r *Renderer) publishEvent(rec *job.Record) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.hardCtx), opTimeout)
	defer cancel()
	if err := natsjs.PublishEvent(ctx, r.res.JS, rec); err != nil {
		r.log.Debug("event left to the relay", "job_id", rec.ID, "err", err)
	}
}

// cappedBuffer collects the output and refuses to grow past max bytes.
type cappedBuffer struct {
	bytes.Buffer
	max int64
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if int64(b.Len())+int64(len(p)) > b.max {
		return 0, errOutputTooLarge
	}
	return b.Buffer.Write(p)
}

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
	"strconv"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/internal/workerhook"
	"github.com/nats-io/nats.go"
)

// errStoreOutage: the result could not be stored because jobgate's store
// was unavailable; the attempt reached no verdict.
var errStoreOutage = errors.New("result store unavailable")

// errAttemptTimeout is the cause of an attempt context whose budget ran out.
var errAttemptTimeout = errors.New("attempt time budget exhausted")

// attempt is one attempt's hold on a job: the assignment jobgate answered
// and the claim's token, the handler's progress and its output. Jobgate
// checks and writes everything; this side only reports.
type attempt struct {
	w           *Workers
	t           *typeRunner
	asg         *wire.Assignment
	log         *slog.Logger
	stopHandler context.CancelCauseFunc

	mu       sync.Mutex
	lost     bool
	lapsed   bool           // lost because its lease ran out (lapse)
	prog     *wire.Progress // as last reported by the handler
	sent     *wire.Progress // as last sent
	nextStep int
	kick     chan struct{}
	// verdict is what became of the attempt's verdict
	// (workerhook.Verdict*); only run's goroutine touches it.
	verdict string

	outOnce sync.Once
	out     *resultWriter
}

func (a *attempt) held() wire.Held { return wire.Held{Key: a.asg.Key, Token: a.asg.Token} }

// run is one attempt: the handler within the budget while beats keep the
// claim alive, the output stored, the verdict reported. With next set, a
// success asks for the slot's next job in the same request, and run
// returns it (nil: none was ready).
func (w *Workers) run(t *typeRunner, asg *wire.Assignment, next *wire.NextRequest) *wire.Assignment {
	// The handler's ctx carries the attempt's span (the assignment's
	// traceparent, when the job is traced), with this process's own span
	// of the handler under it: a user's spans nest under both, and an
	// HTTP call made with ctx through an instrumented client continues
	// the job's trace.
	tctx, span := startHandlerSpan(w.hardCtx, asg)
	defer span.End()
	logAttrs := []any{"job_id", asg.ID, "type", asg.Type, "attempt", asg.Attempt}
	if sc := span.SpanContext(); sc.IsValid() {
		logAttrs = append(logAttrs, "trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
	}
	a := &attempt{w: w, t: t, asg: asg, kick: make(chan struct{}, 1), log: w.log.With(logAttrs...), verdict: workerhook.VerdictUnrecorded}
	w.mu.Lock()
	hear := w.verdict
	w.mu.Unlock()
	if hear != nil {
		defer func() { hear(asg.ID, asg.Attempt, a.verdict) }()
	}
	a.log.Debug("job claimed") // its outcome is logged at info
	timeout := time.Duration(asg.TimeoutMS) * time.Millisecond
	actx, cancelAttempt := context.WithTimeoutCause(tctx, timeout, errAttemptTimeout)
	defer cancelAttempt()
	hctx, stopHandler := context.WithCancelCause(actx)
	defer stopHandler(nil)
	a.stopHandler = stopHandler

	keepCtx, stopKeep := context.WithCancel(context.Background())
	var kwg sync.WaitGroup
	kwg.Add(1)
	go func() { defer kwg.Done(); a.keepAlive(keepCtx) }()
	stopKeeper := sync.OnceFunc(func() { stopKeep(); kwg.Wait() })
	defer stopKeeper()

	started := w.cfg.Now()
	err := a.runHandler(hctx)
	if err == nil && errors.Is(context.Cause(actx), errAttemptTimeout) {
		// The handler outran its time budget and then returned nil: the
		// budget is the type's rule, whatever the handler says.
		err = context.Cause(actx)
	}
	if err == nil && a.isLost() {
		// The handler finished after its lease ran out (or the job was
		// taken from it): its success is not this attempt's to report
		// (classify tells a lapse, given back, from a loss).
		err = errLost
	}
	var stored *wire.StoredResult
	if err == nil && a.out != nil && a.out.tooLarge {
		// The handler went on after ErrResultTooLarge and returned nil:
		// its result is cut short, never a success.
		err = &failure{kind: wire.KindTooLarge, err: ErrResultTooLarge}
	}
	if err == nil {
		stored, err = a.finishOutput()
		if err == nil && a.isLost() {
			// The lease ran out (or the job was taken) while the result
			// was being stored: the claim may be another attempt's by
			// now, so no success is reported.
			err = errLost
		}
	} else {
		a.abortOutput(err)
	}
	stopKeeper()
	// The verdict is reported within the attempt's budget plus the time to
	// report it, whatever ended the handler.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.hardCtx), timeout+opTimeout)
	defer cancel()
	if err == nil {
		a.mu.Lock()
		prog := a.prog
		a.mu.Unlock()
		var reply wire.Reply
		err := w.call(ctx, t.decl.Name, wire.OpDone, wire.DoneRequest{Held: a.held(), Result: stored, Progress: prog, Next: next}, &reply, true)
		switch {
		case err == nil:
			a.verdict = workerhook.VerdictRecorded
			w.observe(t, "succeeded", started)
			size := int64(0)
			if stored != nil {
				size = stored.Size
			}
			a.log.Info("job succeeded", "size", size)
		case refusedAs(err, wire.CodeLost):
			a.verdict = workerhook.VerdictLost
			w.observe(t, "lost", started)
			a.log.Info("job ended elsewhere before it succeeded here", "why", err)
		default:
			a.log.Warn("success not recorded: the claim goes stale and the job is retried", "err", err)
		}
		if err == nil {
			return reply.Job
		}
		return nil
	}
	w.conclude(ctx, a, a.classify(err, actx, hctx), started)
	return nil
}

// runHandler calls the type's handler, turning a panic into a permanent
// failure instead of a crashed process.
func (a *attempt) runHandler(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			a.log.Error("handler panicked", "panic", fmt.Sprint(p))
			err = &failure{kind: wire.KindPanic, err: fmt.Errorf("panic: %v", p)}
		}
	}()
	return a.t.run(ctx, a)
}

// classify turns what ended an attempt into a failure, or into errLost or
// errShutdown or errStoreOutage when it reached no verdict, or into
// ErrResultRefused when jobgate reached it.
func (a *attempt) classify(err error, attemptCtx, handlerCtx context.Context) error {
	var f *failure
	cause := context.Cause(handlerCtx)
	switch {
	// A refused result comes first: jobgate failed the job when it
	// refused it, so a beat after that finds the claim lost, and the
	// refusal is what the owner must read in the log.
	case errors.Is(err, ErrResultRefused):
		return err
	case a.out != nil && errors.Is(a.out.err, ErrResultRefused):
		// The handler ended on its own after the refusal (its output's
		// Write returned it, or it failed for another reason): the job is
		// failed all the same.
		return a.out.err
	case a.isLapsed():
		return errLapsed
	case a.isLost() || errors.Is(err, errLost) || errors.Is(cause, errLost):
		return errLost
	case errors.Is(cause, errShutdown) || errors.Is(err, errShutdown) || a.w.hardCtx.Err() != nil:
		return errShutdown
	case errors.Is(err, errStoreOutage):
		return errStoreOutage
	case a.out != nil && a.out.tooLarge:
		return &failure{kind: wire.KindTooLarge, err: err}
	case errors.As(err, &f):
		return f
	case errors.Is(context.Cause(attemptCtx), errAttemptTimeout):
		return &failure{kind: wire.KindTimeout, err: err}
	}
	return &failure{kind: wire.KindError, err: err}
}

// conclude reports an attempt that produced no result.
func (w *Workers) conclude(ctx context.Context, a *attempt, err error, started time.Time) {
	name := a.t.decl.Name
	var f *failure
	switch {
	case errors.Is(err, errLost):
		w.observe(a.t, "lost", started)
		a.log.Info("job no longer held here (canceled, finished or taken over), stopping")
	case errors.Is(err, errShutdown), errors.Is(err, errStoreOutage), errors.Is(err, errLapsed):
		w.observe(a.t, "given_back", started)
		reason := "shutdown"
		switch {
		case errors.Is(err, errStoreOutage):
			reason = "store_outage"
		case errors.Is(err, errLapsed):
			reason = "lease_lapsed"
		}
		if err := w.call(ctx, name, wire.OpGiveBack, wire.GiveBackRequest{Held: a.held(), Reason: reason}, nil, true); err != nil {
			// The claim goes stale; jobgate hands the job on.
			a.log.Warn("could not give the job back", "reason", reason, "err", err)
			return
		}
		a.log.Info("job given back", "reason", reason)
	case errors.Is(err, ErrResultRefused):
		// The broker failed the job (budget_exceeded) before it answered:
		// a fail of this side's would be answered lost.
		w.observe(a.t, "failed", started)
		a.log.Warn("result refused: no room for it in the tenant's result quota or the result storage; jobgate failed the job", "why", err)
	case errors.As(err, &f):
		req := f.request(a.held())
		err := w.call(ctx, name, wire.OpFail, req, nil, true)
		switch {
		case err == nil:
			a.verdict = workerhook.VerdictRecorded
			w.observe(a.t, "failed", started)
			a.log.Info("attempt failed", "kind", req.Kind, "cause", req.Message)
		case refusedAs(err, wire.CodeLost):
			a.verdict = workerhook.VerdictLost
			w.observe(a.t, "lost", started)
			a.log.Info("job ended elsewhere before its failure was recorded")
		default:
			a.log.Warn("failure not recorded: the claim goes stale and the job is retried", "err", err)
		}
	default:
		a.log.Error("unexpected attempt outcome", "err", err)
	}
}

func (w *Workers) observe(t *typeRunner, outcome string, started time.Time) {
	if w.cfg.OnAttempt != nil {
		w.cfg.OnAttempt(t.decl.Name, outcome, w.cfg.Now().Sub(started))
	}
}

func (a *attempt) isLost() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lost
}

func (a *attempt) lose() {
	a.mu.Lock()
	a.lost = true
	a.mu.Unlock()
	a.stopHandler(errLost)
}

// lapse stops the handler whose lease ran out: the attempt reaches no
// verdict, and once its handler returned it is given back, which jobgate
// refuses if it took the claim over meanwhile, and which otherwise (no
// broker could take it over either, say every dispatcher was cut off)
// spares the job an attempt lost to the outage.
func (a *attempt) lapse() {
	a.mu.Lock()
	a.lost, a.lapsed = true, true
	a.mu.Unlock()
	a.stopHandler(errLapsed)
}

func (a *attempt) isLapsed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lapsed
}

// setProgress records the handler's latest progress and asks for a beat
// when it crossed a tenth of the total.
func (a *attempt) setProgress(done, total int, unit string) {
	if len(unit) > 32 {
		unit = unit[:32]
	}
	done, total = max(done, 0), max(total, 0)
	a.mu.Lock()
	a.prog = &wire.Progress{Done: done, Total: total, Unit: unit}
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

// beatInterval is the longest time between two beats: the shorter of the
// worker's and jobgate's.
func (a *attempt) beatInterval() time.Duration {
	d := a.w.cfg.HeartbeatInterval
	if b := time.Duration(a.asg.BeatMS) * time.Millisecond; b > 0 {
		d = min(d, b)
	}
	return max(d, 100*time.Millisecond)
}

// keepAlive beats until ctx ends: at every progress checkpoint (at most
// five a beat interval) and once a beat interval. A beat jobgate answers
// lost (the job was canceled, finished or taken over) ends the handler;
// so does the worker's drain running out.
//
// The attempt is held on a lease: jobgate's answers (the assignment, each
// beat answered ok) say for how long from then it is this worker's for
// sure (lease_ms). Past that with no later beat answered ok, jobgate may
// have taken the claim over, or let another job of a concurrency key have
// the place, so the handler is stopped and nothing more is reported: two
// attempts never run at once on jobgate's word. The lease is counted from
// when the beat was sent (its answer's own delay only shortens it), and
// from the assignment's arrival.
func (a *attempt) keepAlive(ctx context.Context) {
	every := a.beatInterval()
	t := time.NewTicker(every)
	defer t.Stop()
	var fence <-chan time.Time
	var fenceTimer *time.Timer
	if a.asg.LeaseMS > 0 {
		fenceTimer = time.NewTimer(time.Duration(a.asg.LeaseMS) * time.Millisecond)
		defer fenceTimer.Stop()
		fence = fenceTimer.C
	}
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.w.interrupt:
			a.stopHandler(errShutdown)
			<-ctx.Done()
			return
		case <-fence:
			a.log.Warn("lease ran out with no beat answered: stopping the handler", "lease", time.Duration(a.asg.LeaseMS)*time.Millisecond)
			a.lapse()
			<-ctx.Done()
			return
		case <-a.kick:
			if time.Since(last) < every/5 {
				continue
			}
		case <-t.C:
		}
		last = time.Now()
		lease, ok := a.beat(ctx)
		switch {
		case fenceTimer == nil:
		case a.isLost():
			// Answered lost: the attempt is over, not lapsed.
			fenceTimer.Stop()
			fence = nil
		case ok && lease > 0:
			// Counted from the beat's sending: never later than jobgate's.
			fenceTimer.Reset(max(time.Until(last.Add(lease)), 0))
		case ok:
			// Answered ok with no lease: a jobgate older than the lease
			// (a rolling upgrade) keeps the claim alive without one.
			fenceTimer.Stop()
			fence = nil
		}
	}
}

// beat sends one beat; ok when jobgate answered it ok, with the lease it
// gave (0: none said).
func (a *attempt) beat(ctx context.Context) (time.Duration, bool) {
	a.mu.Lock()
	prog := a.prog
	a.mu.Unlock()
	bctx, cancel := context.WithTimeout(ctx, a.beatInterval())
	defer cancel()
	var reply wire.Reply
	err := a.w.call(bctx, a.t.decl.Name, wire.OpBeat, wire.BeatRequest{Held: a.held(), Progress: prog}, &reply, false)
	switch {
	case err == nil:
		a.mu.Lock()
		a.sent = prog
		a.mu.Unlock()
		return time.Duration(reply.LeaseMS) * time.Millisecond, true
	case refusedAs(err, wire.CodeLost):
		a.lose()
	case ctx.Err() == nil:
		// Not worth failing the attempt for; the next beat tries again
		// (within the lease).
		a.log.Warn("beat not delivered", "err", err)
	}
	return 0, false
}

// output returns the attempt's result writer, starting the upload on first
// use.
func (a *attempt) output() io.Writer {
	a.outOnce.Do(func() {
		pr, pw := io.Pipe()
		rw := &resultWriter{pw: pw, h: sha256.New(), max: a.asg.MaxResultBytes, done: make(chan struct{}), kept: &bytes.Buffer{}}
		go func() {
			defer close(rw.done)
			rw.stored, rw.err = a.upload(pr)
			pr.CloseWithError(errOr(rw.err, io.ErrClosedPipe))
		}()
		a.out = rw
	})
	return a.out
}

func errOr(err, def error) error {
	if err == nil {
		return def
	}
	return err
}

// upload streams r to jobgate in chunks: an open request, answered by one
// broker, then every chunk to that broker's subject for the upload, each
// answered once stored.
func (a *attempt) upload(r io.Reader) (*wire.StoredResult, error) {
	ctx, cancel := context.WithTimeout(a.w.hardCtx, time.Duration(a.asg.TimeoutMS)*time.Millisecond+opTimeout)
	defer cancel()
	var reply wire.Reply
	if err := a.w.call(ctx, a.t.decl.Name, wire.OpOpen, a.held(), &reply, true); err != nil {
		return nil, err
	}
	if reply.Upload == nil || !wire.ValidToken(reply.Upload.Host) || !wire.ValidToken(reply.Upload.ID) {
		return nil, errors.New("jobgate answered no upload")
	}
	target := reply.Upload
	subject := wire.UploadSubject(a.w.cfg.Credential, a.t.decl.Name, target.Host, target.ID)
	buf := make([]byte, wire.ChunkSize)
	for seq := 0; ; seq++ {
		n, rerr := io.ReadFull(r, buf)
		last := errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF)
		if rerr != nil && !last {
			return nil, rerr
		}
		m := nats.NewMsg(subject)
		m.Data = buf[:n]
		m.Header.Set(wire.HeaderSeq, strconv.Itoa(seq))
		if last {
			m.Header.Set(wire.HeaderLast, "1")
		}
		cctx, ccancel := context.WithTimeout(ctx, opTimeout)
		resp, err := a.w.nc.RequestMsgWithContext(cctx, m)
		ccancel()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errStoreOutage, err)
		}
		var cr wire.Reply
		if err := jsonUnmarshal(resp.Data, &cr); err != nil {
			return nil, err
		}
		if cr.Error != nil {
			switch {
			case cr.Error.Code == wire.CodeUnavailable:
				return nil, fmt.Errorf("%w: %w", errStoreOutage, cr.Error)
			case cr.Failed:
				return nil, fmt.Errorf("%w: %w", ErrResultRefused, cr.Error)
			}
			return nil, cr.Error
		}
		if last {
			if cr.Stored == nil {
				return nil, errors.New("jobgate answered the last chunk without the stored result")
			}
			return cr.Stored, nil
		}
	}
}

// finishOutput completes the upload of a handler that succeeded, storing
// the kept copy again when the store broke the streamed upload off.
func (a *attempt) finishOutput() (*wire.StoredResult, error) {
	if a.out == nil {
		return nil, nil
	}
	_ = a.out.pw.Close()
	<-a.out.done
	if errors.Is(a.out.err, errStoreOutage) && a.out.kept != nil {
		a.log.Info("result upload broken off, storing the result again", "cause", a.out.err)
		a.out.stored, a.out.err = a.storeAgain()
	}
	if a.out.err != nil {
		if errors.Is(a.out.err, errStoreOutage) {
			return nil, errStoreOutage
		}
		if errors.Is(a.out.err, ErrResultRefused) {
			return nil, a.out.err
		}
		return nil, &failure{kind: wire.KindInternal, retryable: true, err: a.out.err}
	}
	sum := hex.EncodeToString(a.out.h.Sum(nil))
	if a.out.stored.Size != a.out.n || a.out.stored.SHA256 != sum {
		return nil, &failure{kind: wire.KindInternal, retryable: true,
			err: fmt.Errorf("jobgate stored %d bytes (%s) of %d (%s)", a.out.stored.Size, a.out.stored.SHA256, a.out.n, sum)}
	}
	return a.out.stored, nil
}

// storeAgain uploads the kept copy again while the store is unavailable,
// within the attempt's time.
func (a *attempt) storeAgain() (*wire.StoredResult, error) {
	deadline := time.Now().Add(time.Duration(a.asg.TimeoutMS)*time.Millisecond + opTimeout)
	delay := 100 * time.Millisecond
	for {
		stored, err := a.upload(bytes.NewReader(a.out.kept.Bytes()))
		if !errors.Is(err, errStoreOutage) || time.Now().After(deadline) || a.w.hardCtx.Err() != nil {
			return stored, err
		}
		sleepCtx(a.w.hardCtx, jitter(delay))
		delay = min(2*delay, 2*time.Second)
	}
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
// output whose upload breaks off is given back.
const keptMax = 16 << 20

// resultWriter counts, hashes and streams the output into the upload, and
// keeps a copy of it while it is at most keptMax.
type resultWriter struct {
	pw       *io.PipeWriter
	h        hash.Hash
	n, max   int64
	tooLarge bool
	done     chan struct{}
	stored   *wire.StoredResult // once done is closed
	err      error              // of the upload, once done is closed

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
			if r.kept == nil {
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

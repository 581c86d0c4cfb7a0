package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/retry"
	"github.com/jobgate/jobgate/internal/startstop"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/nats-io/nats.go"
)

// Workers runs the registered types of one process: any number of
// processes, on any machines, may run the same types at once.
type Workers struct {
	cfg   Config
	log   *slog.Logger
	types []*typeRunner
	life  startstop.Lifecycle

	// hardCtx ends every attempt; only a Stop whose drain ran out cancels it.
	hardCtx    context.Context
	hardCancel context.CancelFunc
	// interrupt is closed when Stop's drain time is over: attempts end and
	// give their jobs back.
	interrupt chan struct{}

	mu      sync.Mutex
	started bool // Register is refused from the first Start on
	// undeclared: the types are declared already (workerhook.Undeclared),
	// Start declares none.
	undeclared bool
	// gate, when set (workerhook.Gate), gives a slot the pass it holds
	// from before it asks for a job until it has none.
	gate func(ctx context.Context) (release func(), err error)
	// pace, when set and active (workerhook.Pace), is waited for before
	// each request for a job; successes then chain none.
	pace       func(ctx context.Context) error
	paceActive func() bool
	verdict    func(id string, attempt int, outcome string) // hears each verdict reported (workerhook.Verdict)
	nc         *nats.Conn
	ownConn    bool
	pulls      sync.WaitGroup
	bg         sync.WaitGroup

	// refused holds the subjects the server refused this connection
	// (permissions violations): a request there never gets an answer, so it
	// fails at once instead of waiting.
	refused sync.Map
	// waiting maps a subject to the cancels of the requests under way to
	// it, which a refusal ends at once.
	waitMu  sync.Mutex
	waiting map[string]map[*context.CancelFunc]struct{}
}

// New returns workers for cfg; Register types, then Start or Run.
func New(cfg Config) (*Workers, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	hard, cancel := context.WithCancel(context.Background())
	return &Workers{
		cfg: cfg, log: cfg.Logger.With("worker", cfg.Name),
		hardCtx: hard, hardCancel: cancel, interrupt: make(chan struct{}),
	}, nil
}

// Name is the name this process writes into the records it claims.
func (w *Workers) Name() string { return w.cfg.Name }

func (w *Workers) add(rt *typeRunner) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return errStarted
	}
	for _, t := range w.types {
		if t.decl.Name == rt.decl.Name {
			return fmt.Errorf("worker: type %q registered twice", rt.decl.Name)
		}
	}
	w.types = append(w.types, rt)
	return nil
}

// Run starts the workers, runs until ctx ends, then stops them as Stop
// does without a deadline (draining running jobs for Config.DrainTimeout,
// then giving the rest back). It returns Start's error or Stop's.
func (w *Workers) Run(ctx context.Context) error {
	if err := w.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	return w.Stop(context.Background())
}

// Start connects, declares every registered type (every gateway accepts it
// within moments) and starts taking work. ctx bounds only this start-up:
// Start waits, within ctx, for the deployment to answer, and a declaration
// jobgate refuses (another credential's type, a schema over jobgate's
// bounds) fails it at once, as do wrong credentials or an unreachable URL
// (within ConnectTimeout). Once Start returned, the workers run until
// Stop, whatever becomes of ctx. A Stop during Start ends the start-up at
// once (the connection attempt included), and Start returns an error. A
// Workers starts once.
func (w *Workers) Start(ctx context.Context) error {
	if err := w.life.Start(ctx, w.start, w.stop); err != nil {
		if errors.Is(err, startstop.ErrStarted) {
			return errStarted
		}
		return err
	}
	return nil
}

func (w *Workers) start(sctx, runCtx context.Context) error {
	w.mu.Lock()
	w.started = true
	n := len(w.types)
	undeclared := w.undeclared
	w.mu.Unlock()
	if n == 0 {
		return errors.New("worker: no types registered")
	}
	if err := w.connect(sctx, runCtx); err != nil {
		return err
	}
	for _, t := range w.types {
		if undeclared {
			break
		}
		req := wire.DeclareRequest{Worker: w.cfg.Name, Type: t.decl}
		if err := w.call(sctx, t.decl.Name, wire.OpDeclare, req, nil, true); err != nil {
			w.closeConn()
			return fmt.Errorf("worker: declare %s: %w", t.decl.Name, err)
		}
	}
	started := w.cfg.Now().UTC()
	w.hello(runCtx, started)
	w.bg.Add(1)
	go func() {
		defer w.bg.Done()
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				w.hello(runCtx, started)
			}
		}
	}()
	for _, t := range w.types {
		for range t.concurrency {
			w.pulls.Add(1)
			go w.pullLoop(runCtx, t, false)
		}
		for range w.cfg.NewcomerSlots {
			w.pulls.Add(1)
			go w.pullLoop(runCtx, t, true)
		}
		w.log.Info("worker started", "type", t.decl.Name, "concurrency", t.concurrency, "attempts", t.decl.Attempts,
			"timeout", time.Duration(t.decl.TimeoutSeconds)*time.Second)
	}
	return nil
}

// connect opens the connection (unless Config.Conn is set). The dial and
// the handshake end with sctx, so a Stop during Start does not wait for a
// server that does not answer; later reconnects end with runCtx.
func (w *Workers) connect(sctx, runCtx context.Context) error {
	if w.cfg.Conn != nil {
		w.nc, w.ownConn = w.cfg.Conn, false
		return nil
	}
	dialer := &ctxDialer{ctx: sctx, timeout: w.cfg.ConnectTimeout}
	opts := []nats.Option{
		nats.Name("jobgate worker " + w.cfg.Name), nats.Timeout(w.cfg.ConnectTimeout),
		nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		nats.CustomInboxPrefix(wire.InboxPrefix(w.cfg.Credential)),
		nats.SetCustomDialer(dialer),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				if subj, ok := violatedSubject(err.Error()); ok {
					w.refused.Store(subj, err)
					w.waitMu.Lock()
					for cancel := range w.waiting[subj] {
						(*cancel)()
					}
					w.waitMu.Unlock()
				}
				w.log.Error("NATS refused a request of this worker: its credential does not allow it", "err", err)
			}
		}),
	}
	if w.cfg.User != "" {
		opts = append(opts, nats.UserInfo(w.cfg.User, w.cfg.Password))
	}
	nc, err := nats.Connect(w.cfg.URL, opts...)
	if err == nil {
		err = dialer.connected(runCtx)
		if err != nil {
			nc.Close()
		}
	}
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization") {
			return fmt.Errorf("worker: connect to %s as %q: the user or password is wrong (`jobgate nats-user --worker --type T` prints them): %w",
				w.cfg.URL, w.cfg.User, err)
		}
		return fmt.Errorf("worker: connect to %s: %w", w.cfg.URL, err)
	}
	w.nc, w.ownConn = nc, true
	return nil
}

// ctxDialer dials within a context and closes what it dialed when that
// context ends while the connection is being set up: nats.Connect itself
// takes no context.
type ctxDialer struct {
	timeout time.Duration
	mu      sync.Mutex
	ctx     context.Context
	unbind  []func() bool
}

func (d *ctxDialer) Dial(network, address string) (net.Conn, error) {
	d.mu.Lock()
	ctx := d.ctx
	d.mu.Unlock()
	nd := net.Dialer{Timeout: d.timeout}
	conn, err := nd.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx == ctx { // still setting up: a cancelled start-up ends the handshake
		d.unbind = append(d.unbind, context.AfterFunc(ctx, func() { _ = conn.Close() }))
	}
	return conn, nil
}

// connected ends the set-up: the connection no longer ends with the
// start-up's context, and reconnects dial within ctx. It fails when the
// start-up's context ended meanwhile (the connection may be closed).
func (d *ctxDialer) connected(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, u := range d.unbind {
		u()
	}
	d.unbind = nil
	err := d.ctx.Err()
	d.ctx = ctx
	return err
}

func (w *Workers) closeConn() {
	if w.ownConn && w.nc != nil {
		w.nc.Close()
	}
}

// hello tells jobgate this process serves its types.
func (w *Workers) hello(ctx context.Context, started time.Time) {
	for _, t := range w.types {
		busy := t.runningJobs()
		req := wire.HelloRequest{Worker: w.cfg.Name, Concurrency: t.concurrency, StartedAt: started, Busy: &busy}
		if err := w.call(ctx, t.decl.Name, wire.OpHello, req, nil, false); err != nil && ctx.Err() == nil {
			w.log.Warn("presence not announced", "type", t.decl.Name, "err", err)
		}
	}
}

// Stop stops taking work, lets running jobs finish, then interrupts the
// rest (their contexts end, their jobs go back for another worker) and
// waits for them to be given back. Running jobs get Config.DrainTimeout,
// or half of the time left before ctx's deadline when that is shorter;
// the give-back gets the rest of ctx (10 s, as long as one request may
// take, when ctx has no deadline). Attempts that have not ended by then are abandoned (their
// claims go stale and jobgate hands the jobs on) and Stop returns an error
// wrapping ctx.Err(). Stop is safe to call more than once (later calls
// return how the stop ended) and before or without Start (nil); a Stop
// during Start ends the start-up instead of waiting for it.
func (w *Workers) Stop(ctx context.Context) error {
	return w.life.Stop(ctx)
}

func (w *Workers) stop(ctx context.Context) error {
	drain := w.cfg.DrainTimeout
	if dl, ok := ctx.Deadline(); ok {
		drain = min(drain, time.Until(dl)/2)
	} else {
		// No deadline: the interrupted jobs get as long to be given back
		// as one request may take.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.cfg.DrainTimeout+opTimeout)
		defer cancel()
	}
	done := make(chan struct{})
	go func() { w.pulls.Wait(); close(done) }()
	t := time.NewTimer(drain)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
	select {
	case <-done:
	default:
		w.log.Info("drain time over: interrupting the running jobs, which go back to the queue")
		close(w.interrupt)
	}
	err := startstop.Wait(ctx, done, w.hardCancel)
	if err != nil {
		w.log.Warn("attempts abandoned: their claims go stale and jobgate hands their jobs on", "err", err)
	}
	w.hardCancel()
	w.bg.Wait()
	if ctx.Err() == nil {
		bctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		for _, t := range w.types {
			_ = w.call(bctx, t.decl.Name, wire.OpBye, wire.HelloRequest{Worker: w.cfg.Name}, nil, false)
		}
		cancel()
	}
	w.closeConn()
	w.log.Info("worker stopped")
	if err != nil {
		return fmt.Errorf("worker: stop: %w", err)
	}
	return nil
}

// pullLoop asks for one job at a time, so each free slot takes the tenant
// whose turn it is on jobgate's side. A newcomer slot asks only while the
// regular slots are all busy, and only for a tenant with nothing running
// here (Config.NewcomerSlots).
func (w *Workers) pullLoop(ctx context.Context, t *typeRunner, newcomer bool) {
	defer w.pulls.Done()
	// A regular slot's success asks for its next job in the same request
	// (wire.DoneRequest.Next): under load a job costs one request, not two.
	var chained *wire.Assignment
	// With a gate (workerhook.Gate) a slot asks for a job only while it
	// holds a pass, and gives it back once a request for work came back
	// without one: the jobs it runs one after the other keep it, so a busy
	// slot does not give its pass back and take it again for each job.
	var release func()
	drop := func() {
		if release != nil {
			release()
			release = nil
		}
	}
	defer drop()
	for ctx.Err() == nil {
		if chained != nil {
			a := chained
			chained = nil
			t.started(a.Tenant)
			t.busy.Add(1)
			chained = w.run(t, a, w.chainRequest(ctx))
			t.busy.Add(-1)
			t.ended(a.Tenant)
			continue
		}
		if w.gate != nil && !newcomer && release == nil {
			r, err := w.gate(ctx)
			if err != nil {
				sleepCtx(ctx, jitter(200*time.Millisecond))
				continue
			}
			release = r
		}
		if w.pace != nil && !newcomer && w.paceActive() {
			if err := w.pace(ctx); err != nil {
				if ctx.Err() == nil {
					sleepCtx(ctx, jitter(200*time.Millisecond))
				}
				continue
			}
		}
		req := wire.NextRequest{Worker: w.cfg.Name, WaitMS: w.cfg.PullWait.Milliseconds()}
		if newcomer {
			running, full := t.newcomerRequest()
			if !full {
				sleepCtx(ctx, 50*time.Millisecond)
				continue
			}
			req.Newcomer, req.Running = true, running
		}
		// The request outlives a Stop's drain: jobgate may claim a job for
		// it at any moment of its wait, and such a job is given back at
		// once below rather than left to go stale. Only a Stop whose
		// deadline passed ends it (hardCtx).
		var reply wire.Reply
		err := w.call(w.hardCtx, t.decl.Name, wire.OpNext, req, &reply, false)
		if err == nil && reply.Job != nil && ctx.Err() != nil {
			w.giveBackUnstarted(reply.Job)
			return
		}
		if err != nil {
			drop()
			if ctx.Err() == nil {
				w.log.Warn("asking for work failed", "type", t.decl.Name, "err", err)
				sleepCtx(ctx, jitter(time.Second))
			}
			continue
		}
		if reply.Job == nil {
			drop()
			continue
		}
		a := reply.Job
		t.started(a.Tenant)
		if !newcomer {
			t.busy.Add(1)
			chained = w.run(t, a, w.chainRequest(ctx))
			t.busy.Add(-1)
		} else {
			w.run(t, a, nil)
		}
		t.ended(a.Tenant)
	}
	if chained != nil {
		w.giveBackUnstarted(chained) // handed over as the slot stopped
	}
}

// chainRequest is the next request a regular slot's success carries; nil
// once the slot is stopping.
func (w *Workers) chainRequest(ctx context.Context) *wire.NextRequest {
	if ctx.Err() != nil || w.pace != nil && w.paceActive() {
		return nil
	}
	return &wire.NextRequest{Worker: w.cfg.Name}
}

// giveBackUnstarted returns a job claimed for this process after it began
// to stop: no attempt of it ran here.
func (w *Workers) giveBackUnstarted(a *wire.Assignment) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	err := w.call(ctx, a.Type, wire.OpGiveBack, wire.GiveBackRequest{Held: wire.Held{Key: a.Key, Token: a.Token}, Reason: "shutdown"}, nil, true)
	if err != nil {
		w.log.Warn("a job claimed while stopping could not be given back: its claim goes stale", "job_id", a.ID, "err", err)
		return
	}
	w.log.Info("job claimed while stopping given back", "job_id", a.ID)
}

// opTimeout bounds one request outside a next request's wait.
const opTimeout = 10 * time.Second

// call sends one request of op about typ and decodes its reply into out
// (when not nil). A refusal is a *wire.Error (errors.As). With patient,
// no responders and timeouts (a deployment still starting, a dispatcher
// restarting) are tried again, jittered, until ctx ends.
func (w *Workers) call(ctx context.Context, typ, op string, req, out any, patient bool) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	timeout := opTimeout
	if r, ok := req.(wire.NextRequest); ok {
		timeout = time.Duration(r.WaitMS)*time.Millisecond + 5*time.Second
	}
	subject := wire.Subject(w.cfg.Credential, typ, op)
	policy := retry.Policy{First: 100 * time.Millisecond, Limit: 2 * time.Second, Try: timeout,
		Retryable: func(err error) bool {
			return patient && (errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) ||
				errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil || unavailable(err))
		},
		After: retryAfter}
	patientFor := policy.Retryable
	policy.Retryable = func(err error) bool {
		if _, refused := w.refused.Load(subject); refused {
			return false
		}
		return patientFor(err)
	}
	err = retry.Until(ctx, policy, func(ctx context.Context) error {
		if _, refused := w.refused.Load(subject); refused {
			return nats.ErrPermissionViolation
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w.waitMu.Lock()
		if w.waiting == nil {
			w.waiting = map[string]map[*context.CancelFunc]struct{}{}
		}
		if w.waiting[subject] == nil {
			w.waiting[subject] = map[*context.CancelFunc]struct{}{}
		}
		w.waiting[subject][&cancel] = struct{}{}
		w.waitMu.Unlock()
		defer func() {
			w.waitMu.Lock()
			delete(w.waiting[subject], &cancel)
			if len(w.waiting[subject]) == 0 {
				delete(w.waiting, subject)
			}
			w.waitMu.Unlock()
		}()
		msg, err := w.nc.RequestWithContext(ctx, subject, data)
		if err != nil {
			return err
		}
		var reply wire.Reply
		if err := json.Unmarshal(msg.Data, &reply); err != nil {
			return fmt.Errorf("undecodable reply to %s: %w", op, err)
		}
		if reply.Error != nil {
			return reply.Error
		}
		if out != nil {
			*out.(*wire.Reply) = reply
		}
		return nil
	})
	if v, refused := w.refused.Load(subject); refused && err != nil {
		return fmt.Errorf("this worker's credential may not run type %s (%v): mint one for it with `jobgate nats-user --worker --type %s`",
			typ, v, typ)
	}
	return err
}

// violatedSubject reads the subject out of a server's permissions
// violation ("Permissions Violation for Publish to \"subject\"").
func violatedSubject(msg string) (string, bool) {
	i := strings.Index(msg, "Publish to ")
	if i < 0 {
		return "", false
	}
	rest := strings.Trim(strings.TrimSpace(msg[i+len("Publish to "):]), `"'`)
	if j := strings.IndexAny(rest, `"' `); j >= 0 {
		rest = rest[:j]
	}
	return rest, rest != ""
}

// unavailable reports a refusal that says to try again later.
func unavailable(err error) bool {
	var e *wire.Error
	return errors.As(err, &e) && (e.Code == wire.CodeUnavailable || e.Code == wire.CodeThrottled)
}

// retryAfter is the wait a refusal asks for (a declaration past its
// credential's limit of changes says how long until it may change one
// more), 0 for none.
func retryAfter(err error) time.Duration {
	var e *wire.Error
	if errors.As(err, &e) && e.RetryAfterMS > 0 {
		return time.Duration(min(e.RetryAfterMS, int64(time.Hour/time.Millisecond))) * time.Millisecond
	}
	return 0
}

// refusedAs reports whether err is a refusal with code.
func refusedAs(err error, code string) bool {
	var e *wire.Error
	return errors.As(err, &e) && e.Code == code
}

// jitter spreads d by ±20%, so workers that failed together do not retry
// together.
func jitter(d time.Duration) time.Duration {
	return max(retry.Spread(d, 0.2, rand.Float64), 0)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/retry"
	"github.com/nats-io/nats.go"
)

// Workers runs the registered types of one process: any number of
// processes, on any machines, may run the same types at once.
type Workers struct {
	cfg   Config
	log   *slog.Logger
	types []*typeRunner

	// hardCtx ends every attempt; only a Stop whose drain ran out cancels it.
	hardCtx    context.Context
	hardCancel context.CancelFunc
	// interrupt is closed when Stop's drain time is over: attempts end and
	// give their jobs back to the queue.
	interrupt chan struct{}

	mu       sync.Mutex
	started  bool
	nc       *nats.Conn
	ownConn  bool
	res      *natsjs.Resources
	cancel   context.CancelFunc
	queues   []*natsjs.FairQueue // one per type, once started
	pulls    sync.WaitGroup
	bg       sync.WaitGroup
	stopOnce sync.Once

	// running holds the keys of the jobs this process is running: a record
	// that names this worker for a job not in it is a claim whose answer
	// was lost (see claim).
	runMu   sync.Mutex
	running map[string]struct{}
}

// runs reports whether this process is running the job of key.
func (w *Workers) runs(key string) bool {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	_, ok := w.running[key]
	return ok
}

// track marks the job of key running here until the returned func; false
// when it already is (two deliveries of one job in one process: one runs).
func (w *Workers) track(key string) (func(), bool) {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	if _, ok := w.running[key]; ok {
		return nil, false
	}
	if w.running == nil {
		w.running = map[string]struct{}{}
	}
	w.running[key] = struct{}{}
	return func() {
		w.runMu.Lock()
		delete(w.running, key)
		w.runMu.Unlock()
	}, true
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

// Run starts the workers, runs until ctx ends, then stops them (draining
// running jobs, see Config.DrainTimeout).
func (w *Workers) Run(ctx context.Context) error {
	if err := w.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	w.Stop()
	return nil
}

// Start connects, declares every registered type (every gateway accepts it
// within moments), announces this process and starts pulling work. It
// waits, within ctx, for the deployment to be reachable and provisioned.
// Ending ctx stops pulling; running jobs end only with Stop.
func (w *Workers) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return errStarted
	}
	if len(w.types) == 0 {
		return errors.New("worker: no types registered")
	}
	if err := w.connect(ctx); err != nil {
		return err
	}
	w.queues = make([]*natsjs.FairQueue, len(w.types))
	for i, t := range w.types {
		d := t.decl
		d.DeclaredAt = w.cfg.Now().UTC()
		err := untilAvailable(ctx, func(ctx context.Context) error { return w.res.Types.Declare(ctx, &d) })
		if err != nil {
			w.closeQueues()
			w.closeConn()
			return fmt.Errorf("worker: declare %s: %w", d.Name, err)
		}
		err = untilAvailable(ctx, func(ctx context.Context) (err error) {
			w.queues[i], err = natsjs.OpenFairQueue(ctx, w.res.JS, natsjs.FairConfig{
				Type: d.Name, AckWait: w.cfg.AckWait, MaxRunning: w.cfg.TenantMaxRunning,
				MaxRunningFor: w.cfg.TenantMaxRunningFor, Weights: w.cfg.TenantWeights, Scan: w.cfg.WorkScan,
			})
			return err
		})
		if err != nil {
			w.closeQueues()
			w.closeConn()
			return fmt.Errorf("worker: work queue of %s: %w", d.Name, err)
		}
	}
	w.started = true
	runCtx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	started := w.cfg.Now().UTC()
	w.announce(runCtx, started)
	w.bg.Add(1)
	go func() {
		defer w.bg.Done()
		t := time.NewTicker(natsjs.PresenceTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				w.announce(runCtx, started)
			}
		}
	}()
	for i, t := range w.types {
		for range t.concurrency {
			w.pulls.Add(1)
			go w.pullLoop(runCtx, t, w.queues[i], false)
		}
		for range w.cfg.NewcomerSlots {
			w.pulls.Add(1)
			go w.pullLoop(runCtx, t, w.queues[i], true)
		}
		w.log.Info("worker started", "type", t.decl.Name, "concurrency", t.concurrency, "attempts", t.decl.Attempts,
			"timeout", t.decl.Timeout())
	}
	return nil
}

func (w *Workers) connect(ctx context.Context) error {
	w.nc, w.ownConn = w.cfg.Conn, false
	if w.nc == nil {
		nc, err := natsjs.Connect(natsjs.ConnectConfig{
			URL: w.cfg.URL, Name: "jobgate worker " + w.cfg.Name,
			User: w.cfg.User, Password: w.cfg.Password, InboxPrefix: natsjs.WorkerInboxPrefix,
		})
		if err != nil {
			return fmt.Errorf("worker: %w", err)
		}
		w.nc, w.ownConn = nc, true
	}
	js, err := natsjs.NewJetStream(w.nc)
	if err != nil {
		w.closeConn()
		return fmt.Errorf("worker: %w", err)
	}
	res, err := natsjs.Bind(ctx, js)
	if err != nil {
		w.closeConn()
		return fmt.Errorf("worker: %w", err)
	}
	w.res = res
	return nil
}

// closeQueues ends the work queues' notices (natsjs.FairQueue.Close).
func (w *Workers) closeQueues() {
	for _, q := range w.queues {
		if q != nil {
			q.Close()
		}
	}
}

func (w *Workers) closeConn() {
	if w.ownConn && w.nc != nil {
		w.nc.Close()
	}
}

// announce records this process as live for each of its types.
func (w *Workers) announce(ctx context.Context, started time.Time) {
	for _, t := range w.types {
		actx, cancel := context.WithTimeout(ctx, opTimeout)
		err := w.res.Types.Announce(actx, natsjs.Presence{
			Worker: w.cfg.Name, Type: t.decl.Name, Concurrency: t.concurrency,
			StartedAt: started, SeenAt: w.cfg.Now().UTC(),
		})
		cancel()
		if err != nil && ctx.Err() == nil {
			w.log.Warn("presence not announced", "type", t.decl.Name, "err", err)
		}
	}
}

// Stop stops pulling, lets running jobs finish for DrainTimeout, then
// interrupts the rest (their contexts end, their jobs go back to the queue
// for another worker) and waits for them; attempts that still do not end
// within another DrainTimeout are abandoned to the sweeper.
func (w *Workers) Stop() {
	w.stopOnce.Do(func() {
		w.mu.Lock()
		started := w.started
		if w.cancel != nil {
			w.cancel()
		}
		w.mu.Unlock()
		if !started {
			w.hardCancel()
			return
		}
		done := make(chan struct{})
		go func() { w.pulls.Wait(); close(done) }()
		wait := func(d time.Duration) bool {
			select {
			case <-done:
				return true
			case <-time.After(d):
				return false
			}
		}
		if !wait(w.cfg.DrainTimeout) {
			close(w.interrupt)
			if !wait(w.cfg.DrainTimeout) {
				w.hardCancel()
				wait(w.cfg.DrainTimeout)
			}
		}
		w.hardCancel()
		w.bg.Wait()
		w.closeQueues()
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		for _, t := range w.types {
			_ = w.res.Types.Withdraw(ctx, t.decl.Name, w.cfg.Name)
		}
		cancel()
		w.closeConn()
		w.log.Info("worker stopped")
	})
}

// pullLoop takes one message at a time, so a message never waits in a local
// buffer while its ack timer runs, and each free slot takes the tenant
// whose turn it is, and of it the requester whose turn it is (see
// natsjs.FairQueue). A newcomer slot takes only work
// of a tenant with nothing running here while the regular slots are all
// busy (Config.NewcomerSlots).
func (w *Workers) pullLoop(ctx context.Context, t *typeRunner, q *natsjs.FairQueue, newcomer bool) {
	defer w.pulls.Done()
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, w.cfg.PullWait)
		var msg *natsjs.WorkMsg
		var err error
		if newcomer {
			msg, err = q.NextNewcomer(fctx, t.newcomer)
		} else {
			msg, err = q.Next(fctx)
		}
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("pull failed", "type", t.decl.Name, "err", err)
				sleepCtx(ctx, jitter(time.Second))
			}
			continue
		}
		if msg != nil {
			// The tenant counts as running here before the slot counts
			// as busy: a newcomer slot that sees every slot busy also
			// sees the tenants they hold.
			tenant, _, _ := strings.Cut(msg.Key, ".")
			t.started(tenant)
			if !newcomer {
				t.busy.Add(1)
			}
			w.handle(t, msg)
			if !newcomer {
				t.busy.Add(-1)
			}
			t.ended(tenant)
		}
	}
}

// opTimeout bounds one store operation outside an attempt.
const opTimeout = 10 * time.Second

// untilAvailable runs op, each try bounded by opTimeout, and again while its
// error says JetStream was unavailable, until ctx ends.
func untilAvailable(ctx context.Context, op func(context.Context) error) error {
	return natsjs.UntilAvailable(ctx, opTimeout, op)
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

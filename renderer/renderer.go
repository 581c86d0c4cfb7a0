package renderer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Renderer pulls work from the shared renderers consumer and renders it.
// Any number of renderers, in any number of processes, may run at once.
type Renderer struct {
	cfg  Config
	res  *natsjs.Resources
	log  *slog.Logger
	work natsjs.WorkConsumer

	// hardCtx ends every render; only a Stop whose drain ran out cancels it.
	hardCtx    context.Context
	hardCancel context.CancelFunc
	// interrupt is closed when Stop's drain time is over: renders stop at
	// their next checkpoint and give their job back to the queue.
	interrupt chan struct{}

	mu         sync.Mutex
	pullCancel context.CancelFunc
	wg         sync.WaitGroup
	stopOnce   sync.Once
}

// New builds a renderer; Start runs it.
func New(cfg Config, res *natsjs.Resources, log *slog.Logger) (*Renderer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("renderer: %w", err)
	}
	if res == nil {
		return nil, errors.New("renderer: resources required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hard, cancel := context.WithCancel(context.Background())
	return &Renderer{
		cfg: cfg, res: res, log: log.With("worker", cfg.Worker),
		work:    natsjs.WorkConsumer{AckWait: cfg.AckWait, MaxDeliver: cfg.MaxAttempts},
		hardCtx: hard, hardCancel: cancel, interrupt: make(chan struct{}),
	}, nil
}

// Worker is the name this renderer writes into the records it claims.
func (r *Renderer) Worker() string { return r.cfg.Worker }

// Start makes sure the shared consumer exists and starts Concurrency pull
// loops. Ending ctx stops pulling (as Stop does); running renders are not
// cut short by it, only by Stop.
func (r *Renderer) Start(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	cons, err := natsjs.EnsureWorkConsumer(cctx, r.res.JS, r.work)
	cancel()
	if err != nil {
		return fmt.Errorf("renderer: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pullCancel != nil {
		return errors.New("renderer: already started")
	}
	pullCtx, pullCancel := context.WithCancel(ctx)
	r.pullCancel = pullCancel
	for range r.cfg.Concurrency {
		r.wg.Add(1)
		go r.pullLoop(pullCtx, cons)
	}
	r.log.Info("renderer started", "concurrency", r.cfg.Concurrency, "max_attempts", r.cfg.MaxAttempts,
		"render_timeout", r.cfg.RenderTimeout)
	return nil
}

// Stop stops pulling, lets running renders finish for DrainTimeout, then
// interrupts the rest at their next checkpoint (their jobs go back to the
// queue for another renderer) and waits for them; renders that still do not
// end within another DrainTimeout are canceled.
func (r *Renderer) Stop() {
	r.stopOnce.Do(func() {
		r.mu.Lock()
		if r.pullCancel != nil {
			r.pullCancel()
		}
		r.mu.Unlock()
		done := make(chan struct{})
		go func() { r.wg.Wait(); close(done) }()
		wait := func(d time.Duration) bool {
			select {
			case <-done:
				return true
			case <-time.After(d):
				return false
			}
		}
		if !wait(r.cfg.DrainTimeout) {
			close(r.interrupt)
			if !wait(r.cfg.DrainTimeout) {
				r.hardCancel()
				<-done
			}
		}
		r.hardCancel()
		r.log.Info("renderer stopped")
	})
}

// pullLoop takes one message at a time, so a message never waits in a
// local buffer while its ack timer runs.
func (r *Renderer) pullLoop(ctx context.Context, cons jetstream.Consumer) {
	defer r.wg.Done()
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, r.cfg.PullWait)
		msg, err := cons.Next(jetstream.FetchContext(fctx))
		cancel()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
				errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
				continue
			}
			r.log.Warn("pull failed", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		r.handle(msg)
	}
}

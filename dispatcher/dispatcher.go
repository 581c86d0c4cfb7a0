package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/broker"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/required"
	"github.com/jobgate/jobgate/internal/startstop"
)

// records is what the dispatcher needs of the job record store
// (natsjs.Store). Errors wrap job.ErrNotFound, job.ErrUnavailable and
// natsjs.ErrStale (a lost compare-and-set).
type records interface {
	Get(ctx context.Context, key string) (*job.Record, error)
	Update(ctx context.Context, r *job.Record) error
	Mutate(ctx context.Context, key string, fn func(*job.Record) error) (*job.Record, error)
	// Follow delivers the current records, a Synced marker, then changes.
	Follow(ctx context.Context) (*natsjs.RecordWatch, error)
	// ConsumeChanges is the record change log, through the relay consumer.
	ConsumeChanges(ctx context.Context, batch int) (*natsjs.ChangeLog, error)
}

// workQueue is what the dispatcher does with work messages
// (natsjs.WorkQueue).
type workQueue interface {
	Publish(ctx context.Context, r *job.Record, generation int) error
	PublishAfterEvent(ctx context.Context, r *job.Record, generation int, event uint64) error
	Pending(ctx context.Context, r *job.Record) (natsjs.WorkState, error)
}

// eventPublisher publishes job events in the order of the job's changes
// (natsjs.EventStream).
type eventPublisher interface {
	Publish(ctx context.Context, r *job.Record) (bool, error)
	PublishFirst(ctx context.Context, r *job.Record) (uint64, bool, error)
}

// Stores are the adapters a dispatcher works on, every one required (New
// names a missing one). system maps the provisioned resources to
// them.
type Stores struct {
	Jobs   records        // job records and their change log, which the relay follows (natsjs.Store)
	Work   workQueue      // work messages (natsjs.WorkQueue)
	Events eventPublisher // job events (natsjs.EventStream)
	// Schedule is the scheduled set (natsjs.Schedule): the relay adds a
	// scheduled job's entry, the waker (schedule.go) wakes it when due.
	Schedule scheduleStore
	Broker   broker.Stores // what the broker it runs, which answers the workers, works on
}

// Dispatcher runs the relay and the sweeper. Any
// number of dispatchers may run at once: the relay's consumer is shared,
// and every recovery is a compare-and-set on the job record, so two
// dispatchers never both act on one job.
type Dispatcher struct {
	cfg      Config
	jobs     records
	work     workQueue
	events   eventPublisher
	schedule scheduleStore
	slots    *natsjs.SlotStore // the flow census's (flowcensus.go); nil: none
	log      *slog.Logger

	running  *tracker
	broker   *broker.Broker
	relayLog *natsjs.ChangeLog // for the relay backlog gauge
	// announced: the changes this process's broker announced (announced.go).
	announced *announced
	// held: the terminal changes waiting out their event grace in memory
	// (relay.go); Stop lets them go unacknowledged, to be delivered again.
	heldMu   sync.Mutex
	held     map[*natsjs.LoggedChange]*time.Timer
	startTry time.Duration // natsjs.StartTry; shorter in tests

	life startstop.Lifecycle
	// force is the context of the store and publish operations of the
	// relay: a change in hand is relayed even while the
	// dispatcher stops, until Stop's deadline passes.
	force       context.Context
	forceCancel context.CancelFunc
	stops       []func()
	wg          sync.WaitGroup
}

// New builds a dispatcher on st, every field of which is required; Start
// runs it.
func New(cfg Config, st Stores, log *slog.Logger) (*Dispatcher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("dispatcher: %w", err)
	}
	if err := required.Fields(st); err != nil {
		return nil, fmt.Errorf("dispatcher: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Dispatcher{cfg: cfg, jobs: st.Jobs, work: st.Work, events: st.Events, schedule: st.Schedule, slots: st.Broker.Slots, log: log, running: newTracker(), startTry: natsjs.StartTry,
		announced: newAnnounced(), held: map[*natsjs.LoggedChange]*time.Timer{}}
	bc := cfg.Broker
	if bc.MaxAttempts == 0 {
		bc.MaxAttempts = cfg.MaxAttempts
	}
	if bc.Now == nil {
		bc.Now = cfg.Now
	}
	if bc.OnAttempt == nil && cfg.Metrics != nil {
		bc.OnAttempt = cfg.Metrics.Attempt
	}
	if bc.OnFlowHeldBack == nil && cfg.Metrics != nil {
		bc.OnFlowHeldBack, bc.OnFlowPlace = cfg.Metrics.FlowHeldBack, cfg.Metrics.FlowPlaceTaken
	}
	if bc.OnEvent == nil {
		bc.OnEvent = d.announced.note
	}
	b, err := broker.New(bc, st.Broker, log)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: %w", err)
	}
	d.broker = b
	// Every dispatcher's tracker holds every open job: each exports the
	// same per-type figures (aggregate them with max, not sum).
	if err := cfg.Metrics.ObserveTypes(d.running.byType, cfg.Now); err != nil {
		log.Warn("per-type job gauges not exported: another dispatcher of this process exports them", "err", err)
	}
	return d, nil
}

// Start creates the relay's consumer, starts the record watch
// and the broker; it returns once all are in place. ctx bounds only this
// start-up (and natsjs.StartBound): the dispatcher then runs until Stop.
func (d *Dispatcher) Start(ctx context.Context) error {
	if err := d.life.Start(ctx, d.start, d.stop); err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	return nil
}

func (d *Dispatcher) start(startCtx, runCtx context.Context) error {
	// loops is runCtx, also ended by a failed start-up, which stops what
	// it started before it returns.
	loops, cancel := context.WithCancel(runCtx)
	d.force, d.forceCancel = context.WithCancel(context.WithoutCancel(runCtx))
	sctx, scancel := context.WithTimeout(startCtx, natsjs.StartBound)
	defer scancel()
	for _, start := range []func(context.Context, context.Context) (func(), error){
		d.startRelay, d.startSweeper, d.startWaker, d.startBroker, d.startFlowCensus,
	} {
		stop, err := start(sctx, loops)
		if err != nil {
			cancel()
			for _, s := range d.stops {
				s()
			}
			d.wg.Wait()
			d.forceCancel()
			return err
		}
		d.stops = append(d.stops, stop)
	}
	context.AfterFunc(loops, cancel) // released with runCtx
	d.log.Info("dispatcher started", "grace", d.cfg.Grace, "sweep_interval", d.cfg.SweepInterval)
	return nil
}

// startBroker starts answering the worker processes' requests.
func (d *Dispatcher) startBroker(sctx, _ context.Context) (func(), error) {
	if err := d.broker.Start(sctx); err != nil {
		return nil, err
	}
	// The broker's stop is cut off when the dispatcher's Stop runs out of
	// time: d.force ends then.
	return func() { _ = d.broker.Stop(d.force) }, nil
}

// untilAvailable runs a start step until it succeeds, fails for good, or
// the start bound (ctx) ends: a cluster electing a leader answers
// "unavailable" or not at all for a few seconds, which must not end the
// process (chaos seed 20261205: the relay consumer's create unanswered for
// 30 s around two paused NATS nodes).
func (d *Dispatcher) untilAvailable(ctx context.Context, op func(context.Context) error) error {
	return natsjs.UntilAvailable(ctx, d.startTry, op)
}

// Stop ends the loops and waits for them within ctx. A record change being
// relayed finishes first; one not yet acknowledged is relayed again by
// another dispatcher (or this one's successor). When ctx ends first, the
// operations in flight are cancelled and Stop returns an error wrapping
// ctx.Err(). It is safe to call more than once and before or without
// Start; a Stop during Start ends the start-up.
func (d *Dispatcher) Stop(ctx context.Context) error {
	if err := d.life.Stop(ctx); err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	return nil
}

func (d *Dispatcher) stop(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, s := range d.stops {
			s()
		}
		d.wg.Wait()
		d.releaseHeld()
	}()
	err := startstop.Wait(ctx, done, d.forceCancel)
	d.forceCancel()
	if err != nil {
		d.log.Warn("dispatcher stopped before its loops ended", "err", err)
		return err
	}
	d.log.Info("dispatcher stopped")
	return nil
}

func (d *Dispatcher) spawn(f func()) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		f()
	}()
}

// opCtx bounds one store or publish operation of a loop.
func opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 10*time.Second)
}

package notifier

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/required"
	"github.com/jobgate/jobgate/internal/startstop"
)

// noticeStore is what the notifier keeps in the NOTICES bucket: delivery
// states and create-only mail claims. Errors: job.ErrNotFound for a missing
// key, natsjs.ErrExists for a taken create, natsjs.ErrStale for a lost
// compare-and-set.
type noticeStore interface {
	Get(ctx context.Context, key string) ([]byte, uint64, error)
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	Create(ctx context.Context, key string, value []byte) (uint64, error)
	Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error)
	Delete(ctx context.Context, key string, rev uint64) error
}

// eventSource hands out the events of the notifiers' shared consumer.
type eventSource interface {
	ConsumeEvents(ctx context.Context, c natsjs.NotifierConsumer) (*natsjs.EventFeed, error)
}

// deliveryQueue is the queue of pending deliveries, one consumer per
// destination (natsjs.Deliveries).
type deliveryQueue interface {
	Enqueue(ctx context.Context, t natsjs.DeliveryTask) (dup bool, err error)
	Pending(ctx context.Context, dest string) (int, error)
	JobTasks(ctx context.Context, dest, jobID string, limit int) ([]natsjs.QueuedTask, error)
	ConsumeDeliveries(ctx context.Context, c natsjs.DeliveryConsumer) (*natsjs.DeliveryFeed, error)
}

// eventFeed is a started consumption: natsjs.EventFeed, or a test's stub.
type eventFeed interface {
	Next() (natsjs.EventMsg, error)
	Stop()
}

// deliveryFeed is one destination's started consumption.
type deliveryFeed interface {
	Next() (natsjs.DeliveryMsg, error)
	Stop()
}

// Stores are the adapters a notifier works on, every one required (New
// names a missing one). system maps the provisioned resources to
// them.
type Stores struct {
	Events     eventSource   // job events, through the notifiers' shared consumers (natsjs.EventStream)
	Deliveries deliveryQueue // the queue of pending deliveries (natsjs.Deliveries)
	Notices    noticeStore   // delivery states and mail claims (natsjs.Notices)
	Jobs       jobReader     // job records: a batch's items, for its notice (natsjs.Store)
	Batches    batchReader   // batch records, for batch notices (natsjs.BatchStore)
}

// Notifier consumes job events and sends webhooks and mails. Any number of
// notifiers may run against one deployment; they share one durable consumer
// of events and one durable consumer per destination.
type Notifier struct {
	cfg       Config
	log       *slog.Logger
	events    eventSource
	queue     deliveryQueue
	notices   noticeStore
	jobs      jobReader   // for batch notices
	batches   batchReader //
	http      *http.Client
	mail      mailer
	endpoints map[string][]*endpoint // by tenant
	startTry  time.Duration          // natsjs.StartTry; shorter in tests

	stats      counters
	batchCache batchCache

	mu     sync.Mutex
	dests  map[string]*destination // by id, built at Start
	feeds  []interface{ Stop() }
	cancel context.CancelFunc // cancels the deliveries in flight, late in Stop
	wg     sync.WaitGroup     // workers
	life   startstop.Lifecycle
	// stopping is closed when Stop begins: deliverers waiting out their
	// endpoint's pause return at once.
	stopping chan struct{}
}

// New checks cfg and builds a notifier on st, every field of which is
// required.
func New(cfg Config, st Stores, log *slog.Logger) (*Notifier, error) {
	if err := required.Fields(st); err != nil {
		return nil, fmt.Errorf("notifier: %w", err)
	}
	return newNotifier(cfg, st, log)
}

// newNotifier is New without the check of st: a test of one path gives
// only the stores that path asks.
func newNotifier(cfg Config, st Stores, log *slog.Logger) (*Notifier, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("notifier config: %w", err)
	}
	n := &Notifier{
		stopping: make(chan struct{}),
		cfg:      cfg, log: log, events: st.Events, queue: st.Deliveries, notices: st.Notices, http: newHTTPClient(&cfg),
		jobs: st.Jobs, batches: st.Batches,
		endpoints: map[string][]*endpoint{}, stats: newCounters(), startTry: natsjs.StartTry,
	}
	for tenant, hooks := range cfg.Webhooks {
		for _, h := range hooks {
			ep, err := newEndpoint(tenant, h)
			if err != nil {
				return nil, fmt.Errorf("notifier config: webhook of tenant %s: %w", tenant, err)
			}
			n.endpoints[tenant] = append(n.endpoints[tenant], ep)
		}
	}
	if cfg.Mail.Host != "" {
		n.mail = &smtpMailer{cfg: cfg.Mail}
	} else {
		n.mail = &outboxMailer{dir: cfg.Mail.Outbox}
	}
	cfg.Metrics.RegisterDeliveries(n.stats.all)
	cfg.Metrics.ObservePendingDeliveries(n.pendingDeliveries)
	return n, nil
}

// Start binds to the durable consumers (the events', and one per
// destination) and starts the workers. It returns once events flow. ctx
// bounds only this start-up (and natsjs.StartBound): the notifier then
// runs until Stop, on a context of its own that keeps ctx's values.
func (n *Notifier) Start(ctx context.Context) error {
	if err := n.life.Start(ctx, n.start, n.stop); err != nil {
		return fmt.Errorf("notifier: %w", err)
	}
	return nil
}

func (n *Notifier) start(ctx, runCtx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dests = n.destinations()
	// Deliveries in flight outlive runCtx, which ends when Stop begins:
	// Stop gives them their grace, then cancels work.
	work, cancel := context.WithCancel(context.WithoutCancel(runCtx))
	n.cancel = cancel
	fail := func(err error) error {
		for _, f := range n.feeds {
			f.Stop()
		}
		cancel()
		n.wg.Wait()
		return err
	}
	// Each consumer create is tried again while the cluster elects a
	// leader (natsjs.UntilAvailable), within one bound for the start.
	sctx, scancel := context.WithTimeout(ctx, natsjs.StartBound)
	defer scancel()
	// The destinations first: the router's tasks find their consumers.
	for _, d := range n.dests {
		var feed *natsjs.DeliveryFeed
		err := natsjs.UntilAvailable(sctx, n.startTry, func(ctx context.Context) (err error) {
			feed, err = n.queue.ConsumeDeliveries(ctx, natsjs.DeliveryConsumer{
				Dest: d.id, AckWait: n.cfg.AckWait, MaxPending: n.cfg.MaxPendingPerDestination, Batch: n.cfg.DestinationConcurrency,
			})
			return err
		})
		if err != nil {
			return fail(err)
		}
		n.feeds = append(n.feeds, feed)
		for range n.cfg.DestinationConcurrency {
			n.wg.Add(1)
			go n.deliverer(work, d, feed)
		}
	}
	// One event consumer per tenant with a destination: a tenant's burst
	// of events is routed in its own queue, not ahead of everyone's.
	for _, tenant := range n.tenants() {
		var feed *natsjs.EventFeed
		err := natsjs.UntilAvailable(sctx, n.startTry, func(ctx context.Context) (err error) {
			feed, err = n.events.ConsumeEvents(ctx, natsjs.NotifierConsumer{
				Tenant: tenant, AckWait: n.cfg.AckWait, MaxPending: n.cfg.MaxPending, Batch: n.cfg.Concurrency,
			})
			return err
		})
		if err != nil {
			return fail(err)
		}
		n.startRouter(work, feed)
	}
	n.wg.Add(1)
	go n.watchPending(work)
	n.log.Info("notifier started", "instance", n.cfg.Instance, "concurrency", n.cfg.Concurrency,
		"destinations", len(n.dests), "destination_concurrency", n.cfg.DestinationConcurrency,
		"webhook_tenants", len(n.endpoints), "mail_addresses", len(n.cfg.Mail.Addresses), "smtp", n.cfg.Mail.Host != "")
	return nil
}

// tenants lists the tenants with at least one destination, sorted.
func (n *Notifier) tenants() []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range n.dests {
		if !seen[d.tenant] {
			seen[d.tenant] = true
			out = append(out, d.tenant)
		}
	}
	sort.Strings(out)
	return out
}

// startRouter starts the workers that turn events into delivery tasks. The
// events of one job go to one worker, in the order the consumer hands them
// out, so their tasks are queued in that order.
func (n *Notifier) startRouter(ctx context.Context, feed eventFeed) {
	n.feeds = append([]interface{ Stop() }{feed}, n.feeds...) // stopped first
	shards := make([]chan natsjs.EventMsg, n.cfg.Concurrency)
	for i := range shards {
		shards[i] = make(chan natsjs.EventMsg, 1)
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			for msg := range shards[i] {
				n.route(ctx, msg)
			}
		}()
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer func() {
			for _, s := range shards {
				close(s)
			}
		}()
		for {
			msg, err := feed.Next()
			if err != nil {
				if errors.Is(err, natsjs.ErrFeedStopped) {
					return
				}
				n.log.Warn("notifier: next event", "err", err)
				if !pause(ctx) {
					return
				}
				continue
			}
			_, _, id, _ := natsjs.ScopeOf(msg.Subject())
			h := fnv.New32a()
			_, _ = h.Write([]byte(id))
			shards[h.Sum32()%uint32(len(shards))] <- msg
		}
	}()
}

// Stop stops taking events and tasks, lets in-flight deliveries finish for
// up to StopGrace (less when ctx's deadline is nearer), then cancels them
// (they are redelivered to another instance). When ctx ended before the
// deliveries did, it returns an error wrapping ctx.Err(). It is safe to
// call more than once and before or without Start; a Stop during Start
// ends the start-up.
func (n *Notifier) Stop(ctx context.Context) error {
	if err := n.life.Stop(ctx); err != nil {
		return fmt.Errorf("notifier: %w", err)
	}
	return nil
}

func (n *Notifier) stop(ctx context.Context) error {
	n.mu.Lock()
	feeds, cancel := n.feeds, n.cancel
	n.mu.Unlock()
	close(n.stopping)
	for _, f := range feeds {
		f.Stop()
	}
	gctx, cancelGrace := context.WithTimeout(ctx, n.cfg.StopGrace)
	defer cancelGrace()
	err := startstop.WaitGroup(gctx, &n.wg, func() {
		n.log.Warn("notifier stop: canceling deliveries still in flight")
		cancel()
	})
	cancel()
	n.http.CloseIdleConnections()
	n.log.Info("notifier stopped", "instance", n.cfg.Instance)
	if ctx.Err() != nil && err != nil {
		return err
	}
	return nil // past StopGrace the deliveries go to another instance: no failure
}

// keepAlive tells JetStream every interval that msg is still being worked
// on, so it is not handed to another instance meanwhile.
func keepAlive(msg interface{ InProgress() error }, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// pause waits a moment after a broken pull, so a broken connection does not
// spin; false when ctx ended meanwhile.
func pause(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(250 * time.Millisecond):
		return true
	}
}

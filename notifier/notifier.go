package notifier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
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

// eventFeed is a started consumption: natsjs.EventFeed, or a test's stub.
type eventFeed interface {
	Next() (natsjs.EventMsg, error)
	Stop()
}

// Notifier consumes job events and sends webhooks and mails. Any number of
// notifiers may run against one deployment; they share one durable consumer.
type Notifier struct {
	cfg       Config
	log       *slog.Logger
	events    eventSource
	notices   noticeStore
	http      *http.Client
	mail      mailer
	endpoints map[string][]*endpoint // by tenant

	stats counters

	mu     sync.Mutex
	feed   eventFeed
	cancel context.CancelFunc // cancels the deliveries in flight, late in Stop
	wg     sync.WaitGroup     // workers
	stop   sync.Once
}

// New checks cfg and builds a notifier on the provisioned resources.
func New(cfg Config, res *natsjs.Resources, log *slog.Logger) (*Notifier, error) {
	if res == nil || res.Events == nil || res.Notices == nil {
		return nil, errors.New("notifier: resources required")
	}
	return newNotifier(cfg, res.Events, res.Notices, log)
}

func newNotifier(cfg Config, events eventSource, notices noticeStore, log *slog.Logger) (*Notifier, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("notifier config: %w", err)
	}
	n := &Notifier{
		cfg: cfg, log: log, events: events, notices: notices, http: newHTTPClient(&cfg),
		endpoints: map[string][]*endpoint{}, stats: newCounters(),
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
	return n, nil
}

// Start binds to the durable consumer and starts the workers. It returns
// once events flow; Stop ends them. Deliveries run on a context of their own
// (ctx's values, not its end): Stop ends them.
func (n *Notifier) Start(ctx context.Context) error {
	feed, err := n.events.ConsumeEvents(ctx, natsjs.NotifierConsumer{
		AckWait: n.cfg.AckWait, MaxPending: n.cfg.MaxPending, Batch: n.cfg.Concurrency,
	})
	if err != nil {
		return fmt.Errorf("notifier: %w", err)
	}
	return n.start(ctx, feed)
}

func (n *Notifier) start(ctx context.Context, feed eventFeed) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.feed = feed
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel = cancel
	for range n.cfg.Concurrency {
		n.wg.Add(1)
		go n.worker(work, feed)
	}
	n.log.Info("notifier started", "instance", n.cfg.Instance, "concurrency", n.cfg.Concurrency,
		"webhook_tenants", len(n.endpoints), "mail_addresses", len(n.cfg.Mail.Addresses), "smtp", n.cfg.Mail.Host != "")
	return nil
}

// Stop stops taking events, lets in-flight deliveries finish for up to
// StopGrace, then cancels them (they are redelivered to another instance).
// It is safe to call more than once and without Start.
func (n *Notifier) Stop() {
	n.stop.Do(func() {
		n.mu.Lock()
		feed, cancel := n.feed, n.cancel
		n.mu.Unlock()
		if feed == nil {
			return
		}
		feed.Stop()
		done := make(chan struct{})
		go func() { n.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(n.cfg.StopGrace):
			n.log.Warn("notifier stop: canceling deliveries still in flight")
			cancel()
			<-done
		}
		cancel()
		n.http.CloseIdleConnections()
		n.log.Info("notifier stopped", "instance", n.cfg.Instance)
	})
}

func (n *Notifier) worker(ctx context.Context, feed eventFeed) {
	defer n.wg.Done()
	for {
		msg, err := feed.Next()
		if err != nil {
			if errors.Is(err, natsjs.ErrFeedStopped) {
				return
			}
			n.log.Warn("notifier: next event", "err", err)
			select { // a broken connection must not spin
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
			continue
		}
		n.handle(ctx, msg)
	}
}

// handle runs every channel of one event and acknowledges it when all are
// done, or asks for a redelivery when the earliest pending one is due.
func (n *Notifier) handle(ctx context.Context, msg natsjs.EventMsg) {
	ev, err := decodeEvent(msg.Subject(), msg.Data(), msg.MsgID())
	if err != nil {
		n.log.Error("notifier: dropping malformed event", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	// Keep the event ours while deliveries take their time.
	stopKeepAlive := keepAlive(msg, n.cfg.AckWait/3)
	defer stopKeepAlive()

	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		allDone  = true
		earliest time.Time
	)
	record := func(o outcome) {
		mu.Lock()
		defer mu.Unlock()
		if o.done {
			return
		}
		allDone = false
		if earliest.IsZero() || o.due.Before(earliest) {
			earliest = o.due
		}
	}
	var body []byte
	for _, ep := range n.endpoints[ev.Tenant] {
		if !ep.wants(ev.Job.State) {
			continue
		}
		if body == nil {
			if body, err = ev.webhookBody(); err != nil {
				n.log.Error("notifier: encode webhook body", "err", err)
				_ = msg.Term()
				return
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			record(n.runWebhook(ctx, ep, ev, body))
		}()
	}
	if ev.Job.State.Terminal() {
		if addr := n.cfg.Mail.Addresses[ev.Tenant+"/"+ev.Requester]; addr != "" {
			wg.Add(1)
			go func() {
				defer wg.Done()
				record(n.runMail(ctx, ev, addr))
			}()
		}
	}
	wg.Wait()
	if allDone {
		if err := msg.Ack(); err != nil {
			n.log.Warn("notifier: ack event", "event", ev.ID, "err", err)
		}
		n.stats.events.Add(1)
		return
	}
	// JetStream holds the event and hands it back (to any instance) when the
	// earliest pending delivery is due; meanwhile this worker moves on.
	if err := msg.Nak(max(earliest.Sub(n.cfg.Now()), 0)); err != nil {
		n.log.Warn("notifier: nak event", "event", ev.ID, "err", err)
	}
}

// keepAlive tells JetStream every interval that msg is still being worked
// on, so it is not handed to another instance meanwhile.
func keepAlive(msg natsjs.EventMsg, interval time.Duration) (stop func()) {
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

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
	"github.com/nats-io/nats.go/jetstream"
)

// pullExpiry is how long one pull request of the event consumer lasts.
const pullExpiry = 5 * time.Second

// Notifier consumes job events and sends webhooks and mails. Any number of
// notifiers may run against one deployment; they share one durable consumer.
type Notifier struct {
	cfg       Config
	log       *slog.Logger
	js        jetstream.JetStream
	kv        jetstream.KeyValue
	http      *http.Client
	mail      mailer
	endpoints map[string][]*endpoint // by tenant

	stats counters

	mu     sync.Mutex
	iter   jetstream.MessagesContext
	work   context.Context // deliveries run under it; canceled late in Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // workers
	stop   sync.Once
}

// New checks cfg and builds a notifier on the provisioned resources.
func New(res *natsjs.Resources, cfg Config, log *slog.Logger) (*Notifier, error) {
	if res == nil || res.JS == nil || res.Notices == nil {
		return nil, errors.New("notifier: resources required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("notifier config: %w", err)
	}
	n := &Notifier{
		cfg: cfg, log: log, js: res.JS, kv: res.Notices, http: newHTTPClient(&cfg),
		endpoints: map[string][]*endpoint{},
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
	return n, nil
}

// Start binds to the durable consumer and starts the workers. It returns
// once events flow; Stop ends them.
func (n *Notifier) Start(ctx context.Context) error {
	cons, err := n.js.CreateOrUpdateConsumer(ctx, natsjs.StreamEvents, jetstream.ConsumerConfig{
		Durable:     natsjs.ConsumerNotifier,
		Description: "jobgate notifier: webhooks and mail",
		// All: a notifier started after the first jobs still tells about
		// them; events expire with the stream's max age anyway.
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       n.cfg.AckWait,
		// Unlimited: the notifier decides when a delivery is given up, per
		// channel, and records it; a server-side cap would drop silently.
		MaxDeliver: -1,
		// Events waiting for a retry count as pending: this bounds them.
		MaxAckPending: n.cfg.MaxPending,
		FilterSubject: natsjs.AllEvents,
	})
	if err != nil {
		return fmt.Errorf("notifier consumer: %w", err)
	}
	// A short pull expiry (heartbeats at half of it) notices within seconds
	// that a pull died with a cluster node, instead of after the default
	// 30s, and pulls anew from the consumer's new leader.
	iter, err := cons.Messages(jetstream.PullMaxMessages(n.cfg.Concurrency), jetstream.PullExpiry(pullExpiry))
	if err != nil {
		return fmt.Errorf("notifier consume: %w", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.iter = iter
	n.work, n.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for range n.cfg.Concurrency {
		n.wg.Add(1)
		go n.worker(iter)
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
		iter, cancel := n.iter, n.cancel
		n.mu.Unlock()
		if iter == nil {
			return
		}
		iter.Stop()
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

func (n *Notifier) worker(iter jetstream.MessagesContext) {
	defer n.wg.Done()
	for {
		msg, err := iter.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return
			}
			n.log.Warn("notifier: next event", "err", err)
			time.Sleep(250 * time.Millisecond) // a broken connection must not spin
			continue
		}
		n.handle(n.work, msg)
	}
}

// handle runs every channel of one event and acknowledges it when all are
// done, or asks for a redelivery when the earliest pending one is due.
func (n *Notifier) handle(ctx context.Context, msg jetstream.Msg) {
	ev, err := decodeEvent(msg)
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
	if err := msg.NakWithDelay(max(time.Until(earliest), 0)); err != nil {
		n.log.Warn("notifier: nak event", "event", ev.ID, "err", err)
	}
}

// keepAlive tells JetStream every interval that msg is still being worked
// on, so it is not handed to another instance meanwhile.
func keepAlive(msg jetstream.Msg, interval time.Duration) (stop func()) {
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

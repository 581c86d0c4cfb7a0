package natsjs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// NotifierConsumer is the shape of the notifiers' shared durable consumer
// on JOBGATE_EVENTS.
type NotifierConsumer struct {
	// Tenant, if set, makes it the consumer of that tenant's events alone
	// (NotifierConsumerName), so one tenant's burst of events is not
	// ahead of another's in one queue.
	Tenant string
	// AckWait is how long an event may go without an ack or an InProgress
	// before it is handed to another notifier.
	AckWait time.Duration
	// MaxPending bounds the events in flight across all notifiers, those
	// waiting for a delayed redelivery included.
	MaxPending int
	// Batch is how many events one pull asks for.
	Batch int
}

// eventPullExpiry is how long one pull request of the event consumer lasts.
// Short (heartbeats at half of it), a pull that died with a cluster node is
// noticed within seconds, not after the default 30s.
const eventPullExpiry = 5 * time.Second

// ErrFeedStopped: Next on a feed that was stopped.
var ErrFeedStopped = errors.New("event feed stopped")

// EventMsg is one delivered event. Every delivery must end in Ack, Nak or
// Term; InProgress extends its ack deadline.
type EventMsg interface {
	Subject() string
	Data() []byte
	// MsgID is the Nats-Msg-Id the event was published with, or "".
	MsgID() string
	// Header is one header of the event ("" if absent): HeaderBatch,
	// HeaderBatchNotify.
	Header(name string) string
	Ack() error
	// Nak asks for a redelivery after delay.
	Nak(delay time.Duration) error
	// Term drops the event for good.
	Term() error
	InProgress() error
}

// EventFeed delivers the events of the notifiers' durable consumer.
type EventFeed struct {
	iter jetstream.MessagesContext
}

// ConsumeEvents binds to (creating or updating) the notifiers' durable
// consumer and starts pulling. It delivers every event from the start of
// the stream the first time: a notifier started after the first jobs still
// tells about them; events expire with the stream's max age anyway.
func (e *EventStream) ConsumeEvents(ctx context.Context, c NotifierConsumer) (*EventFeed, error) {
	if c.AckWait <= 0 || c.MaxPending < 1 || c.Batch < 1 {
		return nil, errors.New("notifier consumer: ack wait, max pending and batch must be positive")
	}
	name, filter := ConsumerNotifier, AllEvents
	if c.Tenant != "" {
		name, filter = NotifierConsumerName(c.Tenant), TenantEvents(c.Tenant)
	}
	cons, err := e.js.CreateOrUpdateConsumer(ctx, StreamEvents, jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "jobgate notifier: webhooks and mail",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		// Unlimited: the notifier decides when a delivery is given up, per
		// channel, and records it; a server-side cap would drop silently.
		MaxDeliver:    -1,
		MaxAckPending: c.MaxPending,
		FilterSubject: filter,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", name, mapErr(err))
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(c.Batch), jetstream.PullExpiry(eventPullExpiry))
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", name, mapErr(err))
	}
	return &EventFeed{iter: iter}, nil
}

// Next waits for the next event. After Stop it returns ErrFeedStopped;
// other errors are transient (a broken connection): call Next again.
func (f *EventFeed) Next() (EventMsg, error) {
	m, err := f.iter.Next()
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return nil, ErrFeedStopped
		}
		return nil, mapErr(err)
	}
	return eventMsg{m}, nil
}

// Stop ends the pulls; deliveries not acknowledged come back later.
func (f *EventFeed) Stop() { f.iter.Stop() }

type eventMsg struct{ jetstream.Msg }

func (m eventMsg) MsgID() string {
	if h := m.Headers(); h != nil {
		return h.Get(jetstream.MsgIDHeader)
	}
	return ""
}

func (m eventMsg) Header(name string) string {
	if h := m.Headers(); h != nil {
		return h.Get(name)
	}
	return ""
}

func (m eventMsg) Nak(delay time.Duration) error { return m.NakWithDelay(delay) }

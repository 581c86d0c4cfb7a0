package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jobgate/jobgate/internal/tracing"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JOBGATE_DELIVERIES is the notifier's queue of pending deliveries, one
// subject tree per destination (a webhook endpoint, a tenant's mail):
//
//	jobgate.deliveries.<destination>.<job_id>
//
// It is a work queue: a delivery task is removed when its destination's
// consumer acknowledges it (delivered, or given up for good), so the
// messages under a destination are exactly its pending deliveries. Every
// destination has a durable consumer of its own (deliver_<destination>),
// so a delivery waiting for its next attempt (a delayed Nak) holds a slot of
// its destination only, never one another destination needs.

// Delivery task headers: the event the task delivers.
const (
	HeaderEventID      = "Jobgate-Event-Id"
	HeaderEventSubject = "Jobgate-Event-Subject"
	HeaderRevision     = "Jobgate-Revision"
	HeaderNoticeKind   = "Jobgate-Notice-Kind"
)

// NoticeBatch is the Kind of a batch's one notice (its Data is the
// notifier's summary of the batch, not a job event).
const NoticeBatch = "batch"

// DeliverySubject is where the delivery tasks of one job at one destination
// are queued.
func DeliverySubject(dest, jobID string) string { return deliveriesPrefix + dest + "." + jobID }

// DestinationDeliveries matches every task of one destination.
func DestinationDeliveries(dest string) string { return deliveriesPrefix + dest + ".>" }

// DeliveryConsumerName is the durable consumer of one destination's tasks.
func DeliveryConsumerName(dest string) string { return deliveryConsumerPre + dest }

// Deliveries is the JOBGATE_DELIVERIES work queue.
type Deliveries struct {
	js jetstream.JetStream
}

// NewDeliveries returns the deliveries queue of js (Provision returns it).
func NewDeliveries(js jetstream.JetStream) *Deliveries { return &Deliveries{js: js} }

// DeliveryTask is one delivery to queue: the event (its subject, message id,
// revision and data) and the destination.
type DeliveryTask struct {
	Dest     string
	JobID    string
	EventID  string // the event's Nats-Msg-Id: the webhook-id
	Subject  string // the event's subject
	Revision uint64 // the record revision of the event; 0 if unknown
	Data     []byte
	Kind     string // "" for a job event, NoticeBatch
	// Trace and TraceState are the job's trace context (the event's
	// traceparent and tracestate; a batch notice's, its batch's): the
	// delivery's span continues it. Sent as the task's headers.
	Trace, TraceState string
}

// Enqueue queues a delivery task. The same event at the same destination is
// queued once within the duplicate window: dup reports a copy that was
// already there.
func (d *Deliveries) Enqueue(ctx context.Context, t DeliveryTask) (dup bool, err error) {
	msg := &nats.Msg{Subject: DeliverySubject(t.Dest, t.JobID), Data: t.Data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, t.Dest+"."+t.EventID)
	msg.Header.Set(HeaderEventID, t.EventID)
	msg.Header.Set(HeaderEventSubject, t.Subject)
	if t.Revision > 0 {
		msg.Header.Set(HeaderRevision, strconv.FormatUint(t.Revision, 10))
	}
	if t.Kind != "" {
		msg.Header.Set(HeaderNoticeKind, t.Kind)
	}
	tracing.SetHeader(context.Background(), msg.Header, t.Trace, t.TraceState)
	ack, err := publishMsg(ctx, d.js, msg)
	if err != nil {
		return false, fmt.Errorf("queue delivery %s to %s: %w", t.EventID, t.Dest, mapErr(err))
	}
	return ack.Duplicate, nil
}

// Pending counts the tasks of dest not acknowledged yet: not delivered to a
// notifier, or delivered and waiting (in flight, or for a retry).
func (d *Deliveries) Pending(ctx context.Context, dest string) (int, error) {
	c, err := d.js.Consumer(ctx, StreamDeliveries, DeliveryConsumerName(dest))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("consumer %s: %w", DeliveryConsumerName(dest), mapErr(err))
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("consumer %s: %w", DeliveryConsumerName(dest), mapErr(err))
	}
	return int(info.NumPending) + info.NumAckPending, nil
}

// QueuedTask is a task as the queue holds it.
type QueuedTask struct {
	Seq      uint64
	EventID  string
	Subject  string
	Revision uint64
	Data     []byte
	Kind     string
	// Trace and TraceState: the task's traceparent and tracestate.
	Trace, TraceState string
}

// JobTasks lists the pending tasks of one job at dest, oldest first, up to
// limit: what a destination's consumer checks to keep one job's deliveries
// in order.
func (d *Deliveries) JobTasks(ctx context.Context, dest, jobID string, limit int) ([]QueuedTask, error) {
	s, err := d.js.Stream(ctx, StreamDeliveries)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", StreamDeliveries, mapErr(err))
	}
	subject := DeliverySubject(dest, jobID)
	var out []QueuedTask
	for seq := uint64(1); len(out) < limit; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("tasks of %s at %s: %w", jobID, dest, mapErr(err))
		}
		out = append(out, queuedTask(m.Sequence, m.Header, m.Data))
		seq = m.Sequence + 1
	}
	return out, nil
}

func queuedTask(seq uint64, h nats.Header, data []byte) QueuedTask {
	t := QueuedTask{Seq: seq, Data: data}
	if h != nil {
		t.EventID, t.Subject = h.Get(HeaderEventID), h.Get(HeaderEventSubject)
		t.Revision, _ = strconv.ParseUint(h.Get(HeaderRevision), 10, 64)
		t.Kind = h.Get(HeaderNoticeKind)
		t.Trace, t.TraceState = tracing.FromHeader(h)
	}
	return t
}

// DeliveryConsumer is the shape of one destination's durable consumer.
type DeliveryConsumer struct {
	Dest string
	// AckWait: how long a task may go without an ack or an InProgress
	// before another notifier gets it.
	AckWait time.Duration
	// MaxPending bounds the destination's tasks delivered and not
	// acknowledged (in flight and waiting for a retry), across instances.
	MaxPending int
	// Batch is how many tasks one pull asks for: the destination's
	// concurrency on one instance.
	Batch int
}

// DeliveryMsg is one delivered task. Every delivery ends in Ack, Nak or
// Term; InProgress extends its ack deadline.
type DeliveryMsg interface {
	Task() QueuedTask
	// Delivered counts the deliveries of this task, this one included.
	Delivered() uint64
	Ack() error
	Nak(delay time.Duration) error
	Term() error
	InProgress() error
}

// DeliveryFeed hands out one destination's tasks.
type DeliveryFeed struct {
	iter jetstream.MessagesContext
}

// ConsumeDeliveries binds to (creating or updating) the consumer of one
// destination and starts pulling its tasks.
func (d *Deliveries) ConsumeDeliveries(ctx context.Context, c DeliveryConsumer) (*DeliveryFeed, error) {
	if c.Dest == "" || c.AckWait <= 0 || c.MaxPending < 1 || c.Batch < 1 {
		return nil, errors.New("delivery consumer: destination, ack wait, max pending and batch are required")
	}
	cons, err := d.js.CreateOrUpdateConsumer(ctx, StreamDeliveries, jetstream.ConsumerConfig{
		Durable:       DeliveryConsumerName(c.Dest),
		Description:   "jobgate notifier: the deliveries of one destination",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		MaxDeliver:    -1, // the notifier decides when a delivery is given up
		MaxAckPending: c.MaxPending,
		FilterSubject: DestinationDeliveries(c.Dest),
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", DeliveryConsumerName(c.Dest), mapErr(err))
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(c.Batch), jetstream.PullExpiry(eventPullExpiry))
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", DeliveryConsumerName(c.Dest), mapErr(err))
	}
	return &DeliveryFeed{iter: iter}, nil
}

// Next waits for the next task. After Stop it returns ErrFeedStopped;
// other errors are transient: call Next again.
func (f *DeliveryFeed) Next() (DeliveryMsg, error) {
	m, err := f.iter.Next()
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return nil, ErrFeedStopped
		}
		return nil, mapErr(err)
	}
	return deliveryMsg{m}, nil
}

// Stop ends the pulls; tasks not acknowledged come back later.
func (f *DeliveryFeed) Stop() { f.iter.Stop() }

type deliveryMsg struct{ jetstream.Msg }

func (m deliveryMsg) Task() QueuedTask {
	var seq uint64
	if md, err := m.Metadata(); err == nil {
		seq = md.Sequence.Stream
	}
	return queuedTask(seq, m.Headers(), m.Data())
}

func (m deliveryMsg) Delivered() uint64 {
	if md, err := m.Metadata(); err == nil {
		return md.NumDelivered
	}
	return 1
}

func (m deliveryMsg) Nak(delay time.Duration) error { return m.NakWithDelay(delay) }

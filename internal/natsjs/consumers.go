package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// jobsStream is the stream behind the JOBGATE_JOBS bucket; its subjects are
// the record change log the relay follows.
const jobsStream = "KV_" + BucketJobs

// MaxDeliveriesAdvisory is where the server announces that a work message
// reached the renderers consumer's MaxDeliver without being acknowledged.
// Advisories are plain NATS messages: a process that is down misses them.
const MaxDeliveriesAdvisory = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + StreamWork + "." + ConsumerRenderers

// maxBackOff caps the redelivery backoff of work messages.
const maxBackOff = 10 * time.Minute

// WorkConsumer is the shape of the renderers' shared durable pull consumer on
// JOBGATE_WORK. Every renderer process of a deployment must agree on it; the
// last one to start wins an update.
type WorkConsumer struct {
	// AckWait is how long one delivery may go without an ack or an
	// InProgress before the server hands the message to another renderer.
	AckWait time.Duration
	// MaxDeliver is how many times one work message is delivered (the
	// deployment's max attempts).
	MaxDeliver int
}

// BackOff is the server's redelivery schedule: delivery n of a message that
// is neither acknowledged nor kept alive comes back BackOff[n-1] after its
// last sign of life. It starts at AckWait (the server requires that) and
// doubles, capped at 10 minutes; every entry is at least AckWait, so a
// renderer that calls InProgress every AckWait/3 keeps any delivery alive.
func (w WorkConsumer) BackOff() []time.Duration {
	n := max(w.MaxDeliver, 1)
	out := make([]time.Duration, n)
	d := w.AckWait
	for i := range out {
		out[i] = min(max(d, w.AckWait), max(maxBackOff, w.AckWait))
		d *= 2
	}
	return out
}

// Redelivery is the backoff after the n-th delivery (n ≥ 1) or, read as an
// attempt number, the delay before the attempt after attempt n.
func (w WorkConsumer) Redelivery(n int) time.Duration {
	bo := w.BackOff()
	return bo[min(max(n, 1), len(bo))-1]
}

// NakDelay returns the delay to pass to NakWithDelay on the delivered-th
// delivery so the message comes back after want. With a BackOff the server
// measures a delayed Nak against BackOff[delivered-1] instead of AckWait and
// would add the difference; this takes it off again.
func (w WorkConsumer) NakDelay(want time.Duration, delivered uint64) time.Duration {
	extra := w.Redelivery(int(min(delivered, 1<<16))) - w.AckWait
	return max(want-extra, 0)
}

func (w WorkConsumer) config() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       ConsumerRenderers,
		Description:   "jobgate renderers: one shared work queue for every renderer process",
		FilterSubject: AllWork,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       w.AckWait,
		MaxDeliver:    w.MaxDeliver,
		BackOff:       w.BackOff(),
		MaxAckPending: 10000,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// EnsureWorkConsumer creates or updates the renderers consumer and returns it.
func EnsureWorkConsumer(ctx context.Context, js jetstream.JetStream, w WorkConsumer) (jetstream.Consumer, error) {
	if w.AckWait <= 0 || w.MaxDeliver < 1 {
		return nil, errors.New("work consumer: ack wait and max deliver must be positive")
	}
	c, err := js.CreateOrUpdateConsumer(ctx, StreamWork, w.config())
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", ConsumerRenderers, mapErr(err))
	}
	return c, nil
}

// RelayAckWait is how long the relay may take over one record change before
// another dispatcher gets it.
const RelayAckWait = 30 * time.Second

// EnsureRelayConsumer creates (or updates) the relay's durable consumer on the
// job record change log. It starts at the beginning of the log the first time
// it is created, so records committed before any dispatcher ran are relayed
// too; afterwards its position is durable and shared by every dispatcher.
func EnsureRelayConsumer(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, error) {
	c, err := js.CreateOrUpdateConsumer(ctx, jobsStream, jetstream.ConsumerConfig{
		Durable:       ConsumerRelay,
		Description:   "jobgate relay: publishes work and events derived from job record changes",
		FilterSubject: JobChanges,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       RelayAckWait,
		MaxDeliver:    -1,
		MaxAckPending: 1000,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", ConsumerRelay, mapErr(err))
	}
	return c, nil
}

// KVOperation reads the KV-Operation header of a change-log message: "" for
// a put, "DEL" or "PURGE" for deletions.
func KVOperation(h map[string][]string) string {
	if v := h["KV-Operation"]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// MaxDeliveries is the part of a max-deliveries advisory the dispatcher uses.
type MaxDeliveries struct {
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// ParseMaxDeliveries decodes a max-deliveries advisory.
func ParseMaxDeliveries(data []byte) (MaxDeliveries, error) {
	var a MaxDeliveries
	if err := json.Unmarshal(data, &a); err != nil {
		return a, fmt.Errorf("decode advisory: %w", err)
	}
	if a.StreamSeq == 0 {
		return a, errors.New("decode advisory: no stream sequence")
	}
	return a, nil
}

// WorkAt returns the record key of the work message at seq in JOBGATE_WORK.
// A message that is gone (acknowledged, deleted) is ErrWorkGone.
func WorkAt(ctx context.Context, js jetstream.JetStream, seq uint64) (string, error) {
	s, err := js.Stream(ctx, StreamWork)
	if err != nil {
		return "", fmt.Errorf("stream %s: %w", StreamWork, mapErr(err))
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		return "", fmt.Errorf("work message %d: %w", seq, mapMsgErr(err))
	}
	t, r, id, ok := ScopeOf(m.Subject)
	if !ok {
		return "", fmt.Errorf("work message %d: unexpected subject %q", seq, m.Subject)
	}
	return t + "." + r + "." + id, nil
}

// DeleteWork removes the work message at seq; one that is already gone is
// not an error. A message that reached MaxDeliver stays in the work queue
// until someone removes it.
func DeleteWork(ctx context.Context, js jetstream.JetStream, seq uint64) error {
	s, err := js.Stream(ctx, StreamWork)
	if err != nil {
		return fmt.Errorf("stream %s: %w", StreamWork, mapErr(err))
	}
	if err := s.DeleteMsg(ctx, seq); err != nil && !errors.Is(mapMsgErr(err), ErrWorkGone) {
		// The server answers a delete of a message that is gone with a
		// generic "delete failed" (10057), not "not found": ask whether
		// it is still there.
		if _, gerr := s.GetMsg(ctx, seq); errors.Is(gerr, jetstream.ErrMsgNotFound) {
			return nil
		}
		return fmt.Errorf("delete work message %d: %w", seq, mapErr(err))
	}
	return nil
}

// WorkState is what the work queue knows of one job's work message.
type WorkState struct {
	// Seq is the stream sequence of the job's latest work message; 0 when
	// the queue holds none.
	Seq uint64
	// Delivered: the renderers consumer has delivered it at least once.
	Delivered bool
	// NothingPending: the consumer has no delivery waiting for an ack, so
	// a delivered message still in the queue was given up on (it reached
	// MaxDeliver: a work queue drops acknowledged messages).
	NothingPending bool
}

// Dead reports a message certainly past its last delivery.
func (w WorkState) Dead() bool { return w.Seq != 0 && w.Delivered && w.NothingPending }

// PendingWork looks up the work message of a job and what the renderers
// consumer has done with it. The consumer does not say per message whether
// it still waits for an ack, so a delivered message with other deliveries
// pending is reported Delivered but not Dead; callers confirm it later.
func PendingWork(ctx context.Context, js jetstream.JetStream, tenant, requester, id string) (WorkState, error) {
	s, err := js.Stream(ctx, StreamWork)
	if err != nil {
		return WorkState{}, fmt.Errorf("stream %s: %w", StreamWork, mapErr(err))
	}
	m, err := s.GetLastMsgForSubject(ctx, WorkSubject(tenant, requester, id))
	if err != nil {
		if errors.Is(mapMsgErr(err), ErrWorkGone) {
			return WorkState{}, nil
		}
		return WorkState{}, fmt.Errorf("work of %s: %w", id, mapErr(err))
	}
	ws := WorkState{Seq: m.Sequence}
	c, err := js.Consumer(ctx, StreamWork, ConsumerRenderers)
	if err != nil {
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return ws, nil // no renderer ever ran
		}
		return ws, fmt.Errorf("consumer %s: %w", ConsumerRenderers, mapErr(err))
	}
	info, err := c.Info(ctx)
	if err != nil {
		return ws, fmt.Errorf("consumer %s: %w", ConsumerRenderers, mapErr(err))
	}
	ws.Delivered = m.Sequence <= info.Delivered.Stream
	ws.NothingPending = info.NumAckPending == 0
	return ws, nil
}

// ErrWorkGone: the work message is no longer in the work queue.
var ErrWorkGone = errors.New("work message gone")

func mapMsgErr(err error) error {
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("%w: %w", ErrWorkGone, err)
	}
	return mapErr(err)
}

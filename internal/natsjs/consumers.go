package natsjs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobgate/jobgate/pkg/job"
	"github.com/nats-io/nats.go/jetstream"
)

// jobsStream is the stream behind the JOBGATE_JOBS bucket; its subjects are
// the record change log the relay follows.
const jobsStream = "KV_" + BucketJobs

// WorkConsumer is the shape of the shared durable pull consumer of one job
// type's workers on JOBGATE_WORK. Every worker process of the type must agree
// on it; the last one to start wins an update.
//
// Deliveries are unlimited: a job's attempts are counted in its record, by
// the claims of its workers, never by the queue. A delivery that ends
// without an attempt (the record store was unavailable, the retry was not
// due yet, the worker was stopping) costs the job nothing, so an outage of
// any length delays jobs and never fails them.
type WorkConsumer struct {
	// Type is the job type.
	Type string
	// AckWait is how long one delivery may go without an ack or an
	// InProgress before the server hands the message to another worker.
	AckWait time.Duration
}

func (w WorkConsumer) config() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       WorkConsumerName(w.Type),
		Description:   "jobgate workers of job type " + w.Type + ": one shared work queue for every worker process",
		FilterSubject: TypeWork(w.Type),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       w.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 10000,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// ensureWorkConsumer creates or updates a type's work consumer and returns it.
func ensureWorkConsumer(ctx context.Context, js jetstream.JetStream, w WorkConsumer) (jetstream.Consumer, error) {
	if w.AckWait <= 0 || !job.ValidTypeName(w.Type) {
		return nil, errors.New("work consumer: a valid type and a positive ack wait are required")
	}
	c, err := js.CreateOrUpdateConsumer(ctx, StreamWork, w.config())
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", WorkConsumerName(w.Type), mapErr(err))
	}
	return c, nil
}

// RelayAckWait is how long the relay may take over one record change before
// another dispatcher gets it.
const RelayAckWait = 30 * time.Second

// ensureRelayConsumer creates (or updates) the relay's durable consumer on the
// job record change log. It starts at the beginning of the log the first time
// it is created, so records committed before any dispatcher ran are relayed
// too; afterwards its position is durable and shared by every dispatcher.
func ensureRelayConsumer(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, error) {
	c, err := js.CreateOrUpdateConsumer(ctx, jobsStream, jetstream.ConsumerConfig{
		Durable:       ConsumerRelay,
		Description:   "jobgate relay: publishes work and events derived from job record changes",
		FilterSubject: JobChanges,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       RelayAckWait,
		MaxDeliver:    -1,
		MaxAckPending: 20000, // terminal changes wait out the relay's event grace
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", ConsumerRelay, mapErr(err))
	}
	return c, nil
}

// kvOperation reads the KV-Operation header of a change-log message: "" for
// a put, "DEL" or "PURGE" for deletions.
func kvOperation(h map[string][]string) string {
	if v := h["KV-Operation"]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// WorkState is what the work queue knows of one job's work message.
type WorkState struct {
	// Seq is the stream sequence of the job's latest work message; 0 when
	// the queue holds none (a work queue drops acknowledged messages).
	Seq uint64
	// Delivered: the type's consumer has delivered it at least once.
	Delivered bool
}

// pendingWork looks up the work message of a job and whether its type's
// consumer has delivered it yet.
func pendingWork(ctx context.Context, js jetstream.JetStream, r *job.Record) (WorkState, error) {
	s, err := js.Stream(ctx, StreamWork)
	if err != nil {
		return WorkState{}, fmt.Errorf("stream %s: %w", StreamWork, mapErr(err))
	}
	m, err := s.GetLastMsgForSubject(ctx, WorkSubject(r.Type, r.Tenant, r.Requester, r.ID))
	if err != nil {
		if errors.Is(mapMsgErr(err), ErrWorkGone) {
			return WorkState{}, nil
		}
		return WorkState{}, fmt.Errorf("work of %s: %w", r.ID, mapErr(err))
	}
	ws := WorkState{Seq: m.Sequence}
	c, err := js.Consumer(ctx, StreamWork, WorkConsumerName(r.Type))
	if err != nil {
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return ws, nil // no worker of the type ever ran
		}
		return ws, fmt.Errorf("consumer %s: %w", WorkConsumerName(r.Type), mapErr(err))
	}
	info, err := c.Info(ctx)
	if err != nil {
		return ws, fmt.Errorf("consumer %s: %w", WorkConsumerName(r.Type), mapErr(err))
	}
	ws.Delivered = m.Sequence <= info.Delivered.Stream
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

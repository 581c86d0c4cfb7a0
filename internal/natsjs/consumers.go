package natsjs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/nats-io/nats.go/jetstream"
)

// jobsStream is the stream behind the JOBGATE_JOBS bucket; its subjects are
// the record change log the relay follows.
const jobsStream = "KV_" + BucketJobs

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

// pendingWork looks up the work message of a job and whether the type's
// consumer that holds it (its requester's, or its tenant's when the tenant
// has a cap, in earlier versions) has delivered it yet.
func pendingWork(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, r *job.Record) (WorkState, error) {
	m, err := s.GetLastMsgForSubject(ctx, WorkSubjectOf(r))
	if err != nil {
		if errors.Is(mapMsgErr(err), ErrWorkGone) {
			return WorkState{}, nil
		}
		return WorkState{}, fmt.Errorf("work of %s: %w", r.ID, mapErr(err))
	}
	ws := WorkState{Seq: m.Sequence}
	for _, name := range []string{
		RequesterWorkConsumerName(r.Type, r.Tenant, r.Requester), TenantWorkConsumerName(r.Type, r.Tenant),
	} {
		c, err := js.Consumer(ctx, StreamWork, name)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue
		}
		if err != nil {
			return ws, fmt.Errorf("consumer %s: %w", name, mapErr(err))
		}
		info, err := c.Info(ctx)
		if err != nil {
			return ws, fmt.Errorf("consumer %s: %w", name, mapErr(err))
		}
		ws.Delivered = m.Sequence <= info.Delivered.Stream
		return ws, nil
	}
	// No worker of the type pulled the work lately (idle consumers are
	// removed): not delivered.
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

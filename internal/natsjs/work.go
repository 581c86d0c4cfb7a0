package natsjs

import (
	"context"

	"github.com/jobgate/jobgate/pkg/job"
	"github.com/nats-io/nats.go/jetstream"
)

// WorkQueue is the JOBGATE_WORK stream as the services see it: work
// messages published per job and dispatch generation, looked up and removed
// by stream sequence. Its errors wrap job.ErrUnavailable and ErrWorkGone.
type WorkQueue struct {
	js jetstream.JetStream
}

// NewWorkQueue returns the work queue on js (Provision returns one).
func NewWorkQueue(js jetstream.JetStream) *WorkQueue { return &WorkQueue{js: js} }

// Publish puts a job on the work queue. Publishing the same job and
// generation twice within the duplicate window stores one message.
func (q *WorkQueue) Publish(ctx context.Context, r *job.Record, generation int) error {
	return PublishWork(ctx, q.js, r, generation)
}

// At returns the record key of the work message at seq; one that is gone is
// ErrWorkGone.
func (q *WorkQueue) At(ctx context.Context, seq uint64) (string, error) {
	return WorkAt(ctx, q.js, seq)
}

// Delete removes the work message at seq; one already gone is not an error.
func (q *WorkQueue) Delete(ctx context.Context, seq uint64) error { return DeleteWork(ctx, q.js, seq) }

// Pending reports the work message of a job and what the renderers did with
// it (see WorkState).
func (q *WorkQueue) Pending(ctx context.Context, tenant, requester, id string) (WorkState, error) {
	return PendingWork(ctx, q.js, tenant, requester, id)
}

// EventStream is the JOBGATE_EVENTS stream: one event per stored change of
// a job, and the notifier's durable consumer of them.
type EventStream struct {
	js jetstream.JetStream
}

// NewEventStream returns the event stream on js (Provision returns one).
func NewEventStream(js jetstream.JetStream) *EventStream { return &EventStream{js: js} }

// Publish publishes the state of r on the job's event subject.
func (e *EventStream) Publish(ctx context.Context, r *job.Record) error {
	return PublishEvent(ctx, e.js, r)
}

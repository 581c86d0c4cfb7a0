package natsjs

import (
	"context"

	"github.com/jobgate/jobgate/pkg/job"
	"github.com/nats-io/nats.go/jetstream"
)

// WorkQueue is the JOBGATE_WORK stream as the services see it: work
// messages published per job and dispatch generation, looked up per job.
// Its errors wrap job.ErrUnavailable and ErrWorkGone.
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

// Pending reports the work message of a job and whether its type's workers
// were handed it yet (see WorkState).
func (q *WorkQueue) Pending(ctx context.Context, r *job.Record) (WorkState, error) {
	return pendingWork(ctx, q.js, r)
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

// LastRevision is the record revision of the newest event stored for the
// job, 0 when none is.
func (e *EventStream) LastRevision(ctx context.Context, r *job.Record) (uint64, error) {
	return LastEventRevision(ctx, e.js, r)
}

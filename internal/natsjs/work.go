package natsjs

import (
	"context"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/nats-io/nats.go/jetstream"
)

// WorkQueue is the JOBGATE_WORK stream as the services see it: work
// messages published per job and dispatch generation, looked up per job.
// Its errors wrap job.ErrUnavailable and ErrWorkGone.
type WorkQueue struct {
	js     jetstream.JetStream
	stream *streamRef // for a job's work message (Pending)
}

// NewWorkQueue returns the work queue on js (Provision returns one).
func NewWorkQueue(js jetstream.JetStream) *WorkQueue {
	return &WorkQueue{js: js, stream: newStreamRef(js, StreamWork)}
}

// Publish puts a job on the work queue. Publishing the same job and
// generation twice within the duplicate window stores one message.
func (q *WorkQueue) Publish(ctx context.Context, r *job.Record, generation int) error {
	return PublishWork(ctx, q.js, r, generation)
}

// PublishAfterEvent is Publish of a job whose newest event is at stream
// sequence event: the message carries it, so the broker that claims the
// job announces the claim without looking the event up (a wrong one costs
// that lookup and nothing else: the event's publish checks it).
func (q *WorkQueue) PublishAfterEvent(ctx context.Context, r *job.Record, generation int, event uint64) error {
	return publishWork(ctx, q.js, r, generation, event)
}

// Pending reports the work message of a job and whether its type's workers
// were handed it yet (see WorkState).
func (q *WorkQueue) Pending(ctx context.Context, r *job.Record) (WorkState, error) {
	s, err := q.stream.get(ctx)
	if err != nil {
		return WorkState{}, err
	}
	return pendingWork(ctx, q.js, s, r)
}

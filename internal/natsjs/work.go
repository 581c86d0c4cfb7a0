package natsjs

import (
	"context"
	"errors"
	"fmt"
	"sync"

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

	mu     sync.Mutex
	stream jetstream.Stream // looked up once (LastRevision)
}

// NewEventStream returns the event stream on js (Provision returns one).
func NewEventStream(js jetstream.JetStream) *EventStream { return &EventStream{js: js} }

// Publish publishes the state of r on the job's event subject.
func (e *EventStream) Publish(ctx context.Context, r *job.Record) error {
	return PublishEvent(ctx, e.js, r)
}

// PublishFirst publishes the state of r as the job's first event: JetStream
// stores it only while the job's subject holds no event, in the same step
// (an expected last subject sequence of 0), so an event of a later change,
// published meanwhile by a worker, is never followed by this one. It reports
// whether the job's first event is now stored (by this call or by an
// earlier copy of it), false when another event came first.
func (e *EventStream) PublishFirst(ctx context.Context, r *job.Record) (bool, error) {
	msg := eventMsgOf(r)
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	err := publishOnce(ctx, e.js, msg)
	var api *jetstream.APIError
	if errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("publish event %s: %w", r.ID, mapErr(err))
	}
	return true, nil
}

// LastRevision is the record revision of the newest event stored for the
// job, 0 when none is.
func (e *EventStream) LastRevision(ctx context.Context, r *job.Record) (uint64, error) {
	e.mu.Lock()
	s := e.stream
	e.mu.Unlock()
	if s == nil {
		var err error
		if s, err = e.js.Stream(ctx, StreamEvents); err != nil {
			return 0, fmt.Errorf("stream %s: %w", StreamEvents, mapErr(err))
		}
		e.mu.Lock()
		e.stream = s
		e.mu.Unlock()
	}
	return lastEventRevision(ctx, s, r)
}

package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/nats-io/nats.go/jetstream"
)

// EventStream is the JOBGATE_EVENTS stream: one event per stored change of
// a job, and the notifier's durable consumer of them.
type EventStream struct {
	js     jetstream.JetStream
	stream *streamRef // for a job's newest event (PublishAfter)

	hubOnce sync.Once
	hub     *eventHub // of the feeds (FollowRequester), started on first use
}

func (e *EventStream) eventHub() *eventHub {
	e.hubOnce.Do(func() { e.hub = newEventHub(e.js) })
	return e.hub
}

// NewEventStream returns the event stream on js (Provision returns one).
func NewEventStream(js jetstream.JetStream) *EventStream {
	return &EventStream{js: js, stream: newStreamRef(js, StreamEvents)}
}

// Publish stores the state of r as the job's event, in order: never after
// the event of a later change of the job. It reports whether this call
// stored it (false: the event of this change, or of a later one, is there).
// See PublishAfter.
func (e *EventStream) Publish(ctx context.Context, r *job.Record) (bool, error) {
	_, stored, err := e.PublishAfter(ctx, r, 0)
	return stored, err
}

// maxEventRaces bounds how often PublishAfter reads the job's newest event
// again after another writer's event got in first.
const maxEventRaces = 8

// PublishAfter stores r's event only while the job's newest event is of an
// earlier change. after is the stream sequence of the job's newest event as
// the caller knows it (the sequence its own previous event of the job got),
// 0 when it does not know. JetStream checks it in the same step as it
// stores the event (an expected last subject sequence), so a writer frozen
// between its record write and its event — past the stale limit, while
// another worker took the job over and announced newer changes — or a
// worker's progress racing a cancel, never stores an event behind a newer
// one. When after is 0 or no longer the newest, the newest event is read:
// of this change or a later one, nothing is stored. It returns the sequence
// of the job's newest event after the call, for the caller's next event.
func (e *EventStream) PublishAfter(ctx context.Context, r *job.Record, after uint64) (uint64, bool, error) {
	msg := eventMsgOf(r)
	for range maxEventRaces {
		if after == 0 {
			seq, rev, err := e.newest(ctx, r)
			if err != nil {
				return 0, false, err
			}
			if rev >= r.Revision {
				return seq, false, nil
			}
			after = seq
		}
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(after, 10))
		ack, err := publishOnceAck(ctx, e.js, msg)
		if wrongLastSequence(err) {
			after = 0 // another writer's event got in first: look again
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("publish event %s: %w", r.ID, mapErr(err))
		}
		return ack.Sequence, !ack.Duplicate, nil
	}
	return 0, false, fmt.Errorf("publish event %s: %w: the job's events kept changing", r.ID, ErrStale)
}

// wrongLastSequence reports whether a publish was refused because the
// subject's newest message was not the expected one.
func wrongLastSequence(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// newest returns the stream sequence and record revision of the job's
// newest event; 0, 0 when it has none.
func (e *EventStream) newest(ctx context.Context, r *job.Record) (uint64, uint64, error) {
	s, err := e.stream.get(ctx)
	if err != nil {
		return 0, 0, err
	}
	m, err := s.GetLastMsgForSubject(ctx, EventSubject(r.Tenant, r.Requester, r.ID))
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, 0, nil
		}
		return 0, 0, fmt.Errorf("last event of %s: %w", r.ID, mapErr(err))
	}
	rev, _ := EventRevision(m.Header.Get(jetstream.MsgIDHeader))
	return m.Sequence, rev, nil
}

// PublishFirst publishes the state of r as the job's first event: JetStream
// stores it only while the job's subject holds no event, in the same step
// (an expected last subject sequence of 0), so an event of a later change,
// published meanwhile by a worker, is never followed by this one. It reports
// whether the job's first event is now stored (by this call or by an
// earlier copy of it), false when another event came first, and the
// event's stream sequence when this call learnt it (0 otherwise).
func (e *EventStream) PublishFirst(ctx context.Context, r *job.Record) (uint64, bool, error) {
	msg := eventMsgOf(r)
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	ack, err := publishOnceAck(ctx, e.js, msg)
	if wrongLastSequence(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("publish event %s: %w", r.ID, mapErr(err))
	}
	if ack.Duplicate {
		return 0, true, nil // an earlier copy's: its sequence is not the answer's
	}
	return ack.Sequence, true, nil
}

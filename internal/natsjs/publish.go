package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/codec"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/tracing"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// WorkMsgID is the Nats-Msg-Id of a job's work message for a given dispatch
// generation: 0 for the admission (the job id itself, so the gateway and the
// relay publish the same message), n for the sweeper's n-th re-dispatch.
func WorkMsgID(id string, generation int) string {
	if generation == 0 {
		return id
	}
	return id + ".r" + strconv.Itoa(generation)
}

// PublishWork puts a job on the work queue. Publishing the same job and
// generation twice within the duplicate window stores one message.
func PublishWork(ctx context.Context, js jetstream.JetStream, r *job.Record, generation int) error {
	return publishWork(ctx, js, r, generation, 0)
}

// workEventHeader carries the stream sequence of the job's newest event as
// its publisher knew it (WorkQueue.PublishAfterEvent); workRevisionHeader
// the revision of the record the message's data holds.
const (
	workEventHeader    = "Jobgate-Event-Seq"
	workRevisionHeader = "Jobgate-Record-Revision"
)

// publishWork publishes r's work message. Its data is the record as
// stored at r.Revision, so that the broker claiming the job needs no read
// of it (a record changed since costs the claim's compare-and-set a retry
// after a read, as before); a record of no revision is named by its key.
func publishWork(ctx context.Context, js jetstream.JetStream, r *job.Record, generation int, event uint64) error {
	msg := &nats.Msg{Subject: WorkSubjectOf(r), Data: []byte(r.Key()), Header: nats.Header{}}
	if r.Revision > 0 {
		if data, err := codec.MarshalRecord(r); err == nil {
			msg.Data = data
			msg.Header.Set(workRevisionHeader, strconv.FormatUint(r.Revision, 10))
		}
	}
	msg.Header.Set(jetstream.MsgIDHeader, WorkMsgID(r.ID, generation))
	if event > 0 {
		msg.Header.Set(workEventHeader, strconv.FormatUint(event, 10))
	}
	// No trace context: the broker that claims the job takes its parent
	// from the record (the admission's span), which the data carries.
	if err := publishOnce(ctx, js, msg); err != nil {
		return fmt.Errorf("publish work %s: %w", r.ID, mapErr(err))
	}
	return nil
}

// EventMsgID is the Nats-Msg-Id of a job's change event: one per stored
// revision of the record.
func EventMsgID(r *job.Record) string {
	return r.ID + "." + strconv.FormatUint(r.Revision, 10)
}

// EventRevision reads the record revision out of an event's Nats-Msg-Id.
func EventRevision(msgID string) (uint64, bool) {
	i := strings.LastIndexByte(msgID, '.')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(msgID[i+1:], 10, 64)
	return n, err == nil
}

// PublishEvent publishes the state of r (its resource without result href)
// on the job's event subject, de-duplicated per record revision, without
// looking at the job's other events: for events nothing else publishes
// (the bench's). jobgate's writers use EventStream.Publish, which keeps a
// job's events in the order of its changes.
func PublishEvent(ctx context.Context, js jetstream.JetStream, r *job.Record) error {
	if err := publishOnce(ctx, js, eventMsgOf(r)); err != nil {
		return fmt.Errorf("publish event %s: %w", r.ID, mapErr(err))
	}
	return nil
}

// eventMsgOf is the event of r's change: the job's resource, under the
// change's message id.
func eventMsgOf(r *job.Record) *nats.Msg {
	data := codec.AppendResource(make([]byte, 0, 768), r.Resource("", r.UpdatedAt))
	msg := &nats.Msg{Subject: EventSubject(r.Tenant, r.Requester, r.ID), Data: data, Header: nats.Header{}}
	// The job's trace context (its admission span): a notice about the
	// event is traced as the job's (notifier), whoever published it.
	tracing.SetHeader(context.Background(), msg.Header, r.Trace, r.TraceState)
	msg.Header.Set(jetstream.MsgIDHeader, EventMsgID(r))
	if r.Batch != "" {
		// From the record, like the data: the notifier tells a batch's
		// items by them (docs/api.md, "Batches").
		msg.Header.Set(HeaderBatch, r.Batch)
		if r.BatchNotify != "" {
			msg.Header.Set(HeaderBatchNotify, r.BatchNotify)
		}
	}
	return msg
}

// Event headers of a batch's item: the batch's id, and its notice choice
// when it is not the default.
const (
	HeaderBatch       = "Jobgate-Batch"
	HeaderBatchNotify = "Jobgate-Batch-Notify"
)

// errCodeMsgIDInProcess: a replicated stream is still storing another
// publish with the same Nats-Msg-Id (server 2.12+, code 10158).
const errCodeMsgIDInProcess = 10158

// publishOnce publishes a de-duplicated message. On a replicated stream two
// publishes of one message id at the same moment (the gateway and the relay
// publishing the same work; a renderer and the relay the same event) make
// the second answer "duplicate message id is in process" instead of a
// duplicate ack. That settles within a replication round: ask again until
// the stream answers with the stored message (a duplicate ack) or, if the
// first publish failed after all, stores this one.
func publishOnce(ctx context.Context, js jetstream.JetStream, msg *nats.Msg) error {
	_, err := publishOnceAck(ctx, js, msg)
	return err
}

// publishOnceAck is publishOnce returning the stream's acknowledgement.
func publishOnceAck(ctx context.Context, js jetstream.JetStream, msg *nats.Msg) (*jetstream.PubAck, error) {
	wait := 10 * time.Millisecond
	for {
		ack, err := publishMsg(ctx, js, msg)
		var api *jetstream.APIError
		if err == nil || !errors.As(err, &api) || api.ErrorCode != errCodeMsgIDInProcess {
			return ack, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

package wiring

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/jobgate/jobgate/pkg/job"
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
	msg := &nats.Msg{Subject: WorkSubject(r.Tenant, r.Requester, r.ID), Data: []byte(r.Key()), Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, WorkMsgID(r.ID, generation))
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publish work %s: %w", r.ID, mapErr(err))
	}
	return nil
}

// EventMsgID is the Nats-Msg-Id of a job's state change event.
func EventMsgID(r *job.Record) string {
	return r.ID + "." + string(r.State) + "." + strconv.Itoa(r.Attempt)
}

// PublishEvent publishes the state of r (its resource without result href)
// on the job's event subject, de-duplicated per state and attempt.
func PublishEvent(ctx context.Context, js jetstream.JetStream, r *job.Record) error {
	data, err := json.Marshal(r.Resource("", r.UpdatedAt))
	if err != nil {
		return fmt.Errorf("encode event %s: %w", r.ID, err)
	}
	msg := &nats.Msg{Subject: EventSubject(r.Tenant, r.Requester, r.ID), Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, EventMsgID(r))
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publish event %s: %w", r.ID, mapErr(err))
	}
	return nil
}

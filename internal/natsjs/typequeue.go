package natsjs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// WorkMsg is one delivery of a job's work message.
type WorkMsg struct {
	msg jetstream.Msg
	// Key is the record key of the job (tenant.requester.id); empty when
	// the message names no job.
	Key string
	// Delivered counts the deliveries of this message, this one included.
	Delivered uint64
}

// Ack removes the message from the queue: the job needs nothing more of it.
func (m *WorkMsg) Ack() error { return m.msg.Ack() }

// Nak hands the message back, to be delivered again after delay.
func (m *WorkMsg) Nak(delay time.Duration) error {
	if delay <= 0 {
		return m.msg.Nak()
	}
	return m.msg.NakWithDelay(delay)
}

// InProgress tells the queue the delivery is being worked on: its ack timer
// starts over.
func (m *WorkMsg) InProgress() error { return m.msg.InProgress() }

// Term drops a message that can never be worked on.
func (m *WorkMsg) Term(reason string) error { return m.msg.TermWithReason(reason) }

// PutResult streams a result object into the results store under name and
// returns its size (see putResult). A read error from r aborts the put and
// leaves nothing.
func (r *Resources) PutResult(ctx context.Context, name, contentType, description string, body io.Reader) (int64, error) {
	return putResult(ctx, r.resultChunks, r.Results, name, contentType, description, body)
}

// DeleteResult removes a result object; one that is gone is not an error.
func (r *Resources) DeleteResult(ctx context.Context, name string) error {
	if err := r.Results.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("delete result %s: %w", name, mapErr(err))
	}
	return nil
}

// NewJetStream opens the JetStream API on a connection.
func NewJetStream(nc *nats.Conn) (jetstream.JetStream, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return js, nil
}

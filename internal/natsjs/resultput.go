package natsjs

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

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

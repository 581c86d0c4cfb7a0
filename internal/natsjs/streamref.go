package natsjs

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// streamRef is a stream handle looked up once, on first use: a lookup is a
// STREAM.INFO request, too dear for every event published or result
// checked, and a stream's name never changes under a handle.
type streamRef struct {
	js   jetstream.JetStream
	name string

	mu sync.Mutex
	s  jetstream.Stream
}

func newStreamRef(js jetstream.JetStream, name string) *streamRef {
	return &streamRef{js: js, name: name}
}

// get returns the stream, looking it up the first time (again after a
// failed lookup).
func (r *streamRef) get(ctx context.Context) (jetstream.Stream, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.s != nil {
		return r.s, nil
	}
	s, err := r.js.Stream(ctx, r.name)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", r.name, mapErr(err))
	}
	r.s = s
	return s, nil
}

package natsjs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// publishMsg is jetstream.JetStream.PublishMsg with the stream's answer read
// without encoding/json when it is the acknowledgement the server writes
// (`{"stream":"S",["domain":"D",]"seq":N[,"duplicate": true]}`): decoding
// every answer that way cost a few per cent of the pipeline's CPU (events
// and work are several publishes a job). Any other answer is decoded as
// nats.go does, so errors stay *jetstream.APIError for errors.As; no
// responders is tried again twice, as nats.go does, then answered
// jetstream.ErrNoStreamResponse.
func publishMsg(ctx context.Context, js jetstream.JetStream, msg *nats.Msg) (*jetstream.PubAck, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	nc := js.Conn()
	resp, err := nc.RequestMsgWithContext(ctx, msg)
	for try := 0; errors.Is(err, nats.ErrNoResponders) && try < jetstream.DefaultPubRetryAttempts; try++ {
		// A stream electing its leader answers nobody for a moment.
		wait := jetstream.DefaultPubRetryWait/2 + rand.N(jetstream.DefaultPubRetryWait)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		resp, err = nc.RequestMsgWithContext(ctx, msg)
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, jetstream.ErrNoStreamResponse
	}
	if err != nil {
		return nil, err
	}
	return readPubAck(resp.Data)
}

// apiTimeout bounds a request made without a deadline, as nats.go's
// default does for its own.
const apiTimeout = 5 * time.Second

// bounded is ctx, given apiTimeout when it has no deadline of its own.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, apiTimeout)
}

var (
	ackStream    = []byte(`{"stream":"`)
	ackSeq       = []byte(`","seq":`)
	ackDuplicate = []byte(`,"duplicate": true}`)
)

// readPubAck reads a stream's answer to a publish.
func readPubAck(data []byte) (*jetstream.PubAck, error) {
	if ack, ok := fastPubAck(data); ok {
		return ack, nil
	}
	var resp struct {
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, jetstream.ErrInvalidJSAck
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("nats: %w", resp.Error)
	}
	if resp.PubAck == nil || resp.PubAck.Stream == "" {
		return nil, jetstream.ErrInvalidJSAck
	}
	return resp.PubAck, nil
}

// fastPubAck reads the acknowledgement exactly as the server writes it
// without a domain; ok is false for anything else (an error, a domain, any
// other shape), which is decoded in full.
func fastPubAck(data []byte) (*jetstream.PubAck, bool) {
	rest, found := bytes.CutPrefix(data, ackStream)
	if !found {
		return nil, false
	}
	end := 0
	for end < len(rest) && rest[end] != '"' {
		if c := rest[end]; c < 0x20 || c >= 0x80 || c == '\\' {
			return nil, false // escapes and the rest: what encoding/json reads differently
		}
		end++
	}
	stream := string(rest[:end])
	digits, found := bytes.CutPrefix(rest[end:], ackSeq)
	if end == 0 || !found {
		return nil, false
	}
	n := 0
	for n < len(digits) && digits[n] >= '0' && digits[n] <= '9' {
		n++
	}
	if n == 0 || (n > 1 && digits[0] == '0') {
		return nil, false
	}
	seq, err := strconv.ParseUint(string(digits[:n]), 10, 64)
	if err != nil {
		return nil, false
	}
	ack := &jetstream.PubAck{Stream: stream, Sequence: seq}
	switch tail := digits[n:]; {
	case len(tail) == 1 && tail[0] == '}':
	case bytes.Equal(tail, ackDuplicate):
		ack.Duplicate = true
	default:
		return nil, false
	}
	return ack, true
}

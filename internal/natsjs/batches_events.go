package natsjs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// RequesterEvent is one stored event of a requester's job: its stream
// sequence (the event's id in GET /v1/events), subject and data (the job
// resource without result.href).
type RequesterEvent struct {
	Seq     uint64
	Subject string
	Data    []byte
}

// RequesterFeed follows the events of every job of one requester on
// JOBGATE_EVENTS, through an ordered consumer of its own (no state on the
// server past its life), from a stream sequence on.
type RequesterFeed struct {
	iter jetstream.MessagesContext
	ch   chan RequesterEvent
	done chan struct{}
}

// FollowRequester starts delivering the events of tenant's requester
// stored after sequence after (0: only those stored from now on). The feed
// is in place when it returns.
func (e *EventStream) FollowRequester(ctx context.Context, tenant, requester string, after uint64) (*RequesterFeed, error) {
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{eventsPrefix + tenant + "." + requester + ".>"},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	}
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := e.js.OrderedConsumer(ctx, StreamEvents, cfg)
	if err != nil {
		return nil, fmt.Errorf("requester events: %w", mapErr(err))
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(64))
	if err != nil {
		return nil, fmt.Errorf("requester events: %w", mapErr(err))
	}
	f := &RequesterFeed{iter: iter, ch: make(chan RequesterEvent, 16), done: make(chan struct{})}
	go f.run()
	return f, nil
}

func (f *RequesterFeed) run() {
	defer close(f.ch)
	for {
		m, err := f.iter.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return
		}
		if err != nil { // an ordered consumer recreates itself; wait a moment
			select {
			case <-time.After(100 * time.Millisecond):
				continue
			case <-f.done:
				return
			}
		}
		md, err := m.Metadata()
		if err != nil {
			continue
		}
		select {
		case f.ch <- RequesterEvent{Seq: md.Sequence.Stream, Subject: m.Subject(), Data: m.Data()}:
		case <-f.done:
			return
		}
	}
}

// Events delivers the events in stream order; it is closed after Stop.
func (f *RequesterFeed) Events() <-chan RequesterEvent { return f.ch }

// Stop ends the feed.
func (f *RequesterFeed) Stop() {
	select {
	case <-f.done:
	default:
		close(f.done)
	}
	f.iter.Stop()
}

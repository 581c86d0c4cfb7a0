package natsjs

import (
	"context"
	"fmt"
	"sync"
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
	// Batch names the batch the job is an item of ("": none), and
	// Revision the record revision the event is of.
	Batch    string
	Revision uint64
}

// requesterEvent is the RequesterEvent of a stored event.
func requesterEvent(m jetstream.Msg) (RequesterEvent, bool) {
	md, err := m.Metadata()
	if err != nil {
		return RequesterEvent{}, false
	}
	e := RequesterEvent{Seq: md.Sequence.Stream, Subject: m.Subject(), Data: m.Data()}
	if h := m.Headers(); h != nil {
		e.Batch = h.Get(HeaderBatch)
		e.Revision, _ = EventRevision(h.Get(jetstream.MsgIDHeader))
	}
	return e, true
}

// RequesterFeed follows the events of every job of one requester (or of
// every requester or tenant, "*") on JOBGATE_EVENTS: what it missed
// through an ordered consumer of its own, then the gateway's shared hub
// (eventhub.go).
type RequesterFeed struct {
	tenant, requester string
	hub               *eventHub
	replay            jetstream.Consumer // nil: nothing to read first
	after             uint64

	live     chan RequesterEvent // from the hub
	lost     chan struct{}       // closed when the hub dropped the feed
	lostOnce sync.Once
	ch       chan RequesterEvent
	done     chan struct{}
	stopOnce sync.Once
}

// FollowRequester starts delivering the events of tenant's requester (each
// a subject token or "*") stored after sequence after (0: only those
// stored from now on). The feed is in place when it returns.
func (e *EventStream) FollowRequester(ctx context.Context, tenant, requester string, after uint64) (*RequesterFeed, error) {
	f := &RequesterFeed{tenant: tenant, requester: requester, hub: e.eventHub(), after: after,
		live: make(chan RequesterEvent, hubBuffer), lost: make(chan struct{}),
		ch: make(chan RequesterEvent, 16), done: make(chan struct{})}
	// Joined before the replay is read, so that what the replay ends
	// before comes from the hub: no event falls between the two.
	if err := f.hub.join(ctx, f); err != nil {
		return nil, fmt.Errorf("requester events: %w", err)
	}
	if after > 0 {
		cons, err := e.js.OrderedConsumer(ctx, StreamEvents, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{eventsPrefix + tenant + "." + requester + ".>"},
			DeliverPolicy:  jetstream.DeliverByStartSequencePolicy, OptStartSeq: after + 1,
			InactiveThreshold: 10 * time.Second,
		})
		if err != nil {
			f.hub.leave(f)
			return nil, fmt.Errorf("requester events: %w", mapErr(err))
		}
		f.replay = cons
	}
	go f.run()
	return f, nil
}

func (f *RequesterFeed) run() {
	defer close(f.ch)
	last := f.after
	if f.replay != nil {
		var ok bool
		if last, ok = f.readMissed(); !ok {
			return
		}
	}
	for {
		select {
		case e := <-f.live:
			if e.Seq <= last {
				continue // read by the replay already
			}
			last = e.Seq
			if !f.send(e) {
				return
			}
		case <-f.lost:
			return // the client resumes after the last event it got
		case <-f.done:
			return
		}
	}
}

// readMissed sends what was stored after f.after up to now, and returns the
// last sequence sent; false when the feed ended meanwhile.
func (f *RequesterFeed) readMissed() (uint64, bool) {
	last := f.after
	for {
		batch, err := f.replay.FetchNoWait(replayBatch)
		if err != nil {
			return last, false
		}
		n := 0
		for m := range batch.Messages() {
			n++
			e, ok := requesterEvent(m)
			if !ok {
				continue
			}
			last = e.Seq
			if !f.send(e) {
				return last, false
			}
		}
		if batch.Error() != nil {
			return last, false
		}
		if n == 0 {
			return last, true
		}
	}
}

func (f *RequesterFeed) send(e RequesterEvent) bool {
	select {
	case f.ch <- e:
		return true
	case <-f.done:
		return false
	}
}

// overflow is the hub dropping the feed (it fell behind, or the hub
// stopped): the feed ends.
func (f *RequesterFeed) overflow() { f.lostOnce.Do(func() { close(f.lost) }) }

// Events delivers the events in stream order; it is closed when the feed
// ends (Stop, or a client too slow for the hub: it resumes with the id of
// the last event it got).
func (f *RequesterFeed) Events() <-chan RequesterEvent { return f.ch }

// Stop ends the feed.
func (f *RequesterFeed) Stop() {
	f.stopOnce.Do(func() {
		close(f.done)
		f.hub.leave(f)
	})
}

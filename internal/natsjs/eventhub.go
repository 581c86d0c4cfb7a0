package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A gateway serves every open GET /v1/events (and the console's admin
// stream) from one ordered consumer of JOBGATE_EVENTS, the hub, instead of
// one consumer per stream: a thousand open streams were a thousand
// consumers on the server and as many pulls, buffers and heartbeats in the
// gateway. The hub runs while a feed is open (and hubIdle after the last
// one closes), reads every event stored from its start on and hands each
// to the feeds whose filter it matches. A feed that resumes after an event
// reads what it missed through an ordered consumer of its own first, and
// then takes the hub's events past what it read. A feed that cannot keep
// up (hubBuffer events waiting) is ended rather than let it hold up the
// others: its client resumes with Last-Event-ID and loses nothing.

const (
	// hubBuffer is the events one feed may have waiting.
	hubBuffer = 256
	// hubIdle is how long the hub outlives its last feed (page reloads
	// come and go).
	hubIdle = 30 * time.Second
	// replayBatch is how many events a resuming feed reads at once.
	replayBatch = 256
)

type eventHub struct {
	js jetstream.JetStream

	startMu sync.Mutex // one start at a time
	mu      sync.Mutex
	iter    jetstream.MessagesContext // nil: not running
	exact   map[string]map[*RequesterFeed]struct{}
	wild    map[*RequesterFeed]struct{}
	idle    *time.Timer
}

func newEventHub(js jetstream.JetStream) *eventHub {
	return &eventHub{js: js, exact: map[string]map[*RequesterFeed]struct{}{}, wild: map[*RequesterFeed]struct{}{}}
}

func scopeKey(tenant, requester string) string { return tenant + "." + requester }

// join adds f, starting the hub when it is not running; f receives every
// event the hub reads from then on.
func (h *eventHub) join(ctx context.Context, f *RequesterFeed) error {
	h.startMu.Lock()
	defer h.startMu.Unlock()
	h.mu.Lock()
	running := h.iter != nil
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	h.mu.Unlock()
	if !running {
		cons, err := h.js.OrderedConsumer(ctx, StreamEvents, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{eventsPrefix + ">"}, DeliverPolicy: jetstream.DeliverNewPolicy,
		})
		if err != nil {
			return fmt.Errorf("events: %w", mapErr(err))
		}
		iter, err := cons.Messages(jetstream.PullMaxMessages(hubBuffer))
		if err != nil {
			return fmt.Errorf("events: %w", mapErr(err))
		}
		h.mu.Lock()
		h.iter = iter
		h.mu.Unlock()
		go h.run(iter)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if f.tenant == "*" || f.requester == "*" {
		h.wild[f] = struct{}{}
	} else {
		k := scopeKey(f.tenant, f.requester)
		if h.exact[k] == nil {
			h.exact[k] = map[*RequesterFeed]struct{}{}
		}
		h.exact[k][f] = struct{}{}
	}
	return nil
}

// leave removes f; the hub stops hubIdle after its last feed left.
func (h *eventHub) leave(f *RequesterFeed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(f)
	if len(h.exact) == 0 && len(h.wild) == 0 && h.iter != nil && h.idle == nil {
		h.idle = time.AfterFunc(hubIdle, h.stopIfIdle)
	}
}

func (h *eventHub) removeLocked(f *RequesterFeed) {
	delete(h.wild, f)
	k := scopeKey(f.tenant, f.requester)
	if m := h.exact[k]; m != nil {
		delete(m, f)
		if len(m) == 0 {
			delete(h.exact, k)
		}
	}
}

func (h *eventHub) stopIfIdle() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.idle = nil
	if len(h.exact) > 0 || len(h.wild) > 0 || h.iter == nil {
		return
	}
	h.iter.Stop()
	h.iter = nil
}

// close stops the hub and ends its feeds.
func (h *eventHub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	if h.iter != nil {
		h.iter.Stop()
		h.iter = nil
	}
}

func (h *eventHub) run(iter jetstream.MessagesContext) {
	for {
		m, err := iter.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			h.mu.Lock()
			if h.iter == iter {
				h.iter = nil // closed under the hub: the next feed starts it again
			}
			if h.iter != nil { // stopped idle, and started again since
				h.mu.Unlock()
				return
			}
			// Its feeds end: their clients resume with Last-Event-ID.
			for _, m := range h.exact {
				for f := range m {
					f.overflow()
				}
			}
			for f := range h.wild {
				f.overflow()
			}
			h.exact, h.wild = map[string]map[*RequesterFeed]struct{}{}, map[*RequesterFeed]struct{}{}
			h.mu.Unlock()
			return
		}
		if err != nil {
			if h.js.Conn().IsClosed() {
				iter.Stop() // the next Next reports it closed: the feeds end
			}
			time.Sleep(50 * time.Millisecond) // an ordered consumer recreates itself
			continue
		}
		tenant, requester, ok := eventScope(m.Subject())
		if !ok {
			continue
		}
		e, ok := requesterEvent(m)
		if !ok {
			continue
		}
		h.mu.Lock()
		for f := range h.exact[scopeKey(tenant, requester)] {
			h.offerLocked(f, e)
		}
		for f := range h.wild {
			if (f.tenant == "*" || f.tenant == tenant) && (f.requester == "*" || f.requester == requester) {
				h.offerLocked(f, e)
			}
		}
		h.mu.Unlock()
	}
}

// offerLocked hands e to f, or ends f when it has hubBuffer events
// waiting already.
func (h *eventHub) offerLocked(f *RequesterFeed, e RequesterEvent) {
	select {
	case f.live <- e:
	default:
		h.removeLocked(f)
		f.overflow()
	}
}

// eventScope reads tenant and requester out of an event's subject.
func eventScope(subject string) (tenant, requester string, ok bool) {
	rest, ok := strings.CutPrefix(subject, eventsPrefix)
	if !ok {
		return "", "", false
	}
	parts := strings.SplitN(rest, ".", 3)
	if len(parts) != 3 {
		return "", "", false
	}
	return parts[0], parts[1], true
}

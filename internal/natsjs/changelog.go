package natsjs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobgate/jobgate/internal/codec"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/nats-io/nats.go/jetstream"
)

// relayPullExpiry is how long one pull request of the relay lasts: short,
// so a pull that died with a cluster node is replaced within seconds, not
// after the default 30s. relayPullHeartbeat is how often the server says a
// pull request still waits: two missed (ErrPullSilent) and the client
// forgets its requests and asks again. Under load a relay pull has been
// seen to go silent (the server holding no request of it, with changes
// pending, while the client counted its requests as outstanding); the
// client's default (half the expiry) left every change waiting 5s then.
const (
	relayPullExpiry    = 5 * time.Second
	relayPullHeartbeat = time.Second
)

// ErrPullSilent: a change-log pull heard nothing, not even a heartbeat,
// for two heartbeats. The next Next asks the server again: call it at once.
var ErrPullSilent = errors.New("change log pull silent")

// changePull is how the relays pull a change log: batch changes at a time.
func changePull(batch int) []jetstream.PullMessagesOpt {
	return []jetstream.PullMessagesOpt{jetstream.PullMaxMessages(max(batch, 1)),
		jetstream.PullExpiry(relayPullExpiry), jetstream.PullHeartbeat(relayPullHeartbeat)}
}

// ChangeLog delivers the job record change log through the dispatchers'
// shared durable consumer (the relay's).
type ChangeLog struct {
	cons jetstream.Consumer
	iter jetstream.MessagesContext
}

// ConsumeChanges binds to (creating or updating) the relay consumer and
// starts pulling batch changes at a time.
func (s *Store) ConsumeChanges(ctx context.Context, batch int) (*ChangeLog, error) {
	if s.js == nil {
		return nil, errors.New("change log: store has no JetStream handle")
	}
	cons, err := ensureRelayConsumer(ctx, s.js)
	if err != nil {
		return nil, err
	}
	iter, err := cons.Messages(changePull(batch)...)
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", ConsumerRelay, mapErr(err))
	}
	return &ChangeLog{cons: cons, iter: iter}, nil
}

// Next waits for the next change. After Stop it returns ErrFeedStopped;
// other errors are transient: call Next again (at once after
// ErrPullSilent).
func (l *ChangeLog) Next() (*LoggedChange, error) {
	m, err := l.iter.Next()
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return nil, ErrFeedStopped
		}
		if errors.Is(err, jetstream.ErrNoHeartbeat) {
			return nil, fmt.Errorf("%w: %w", ErrPullSilent, err)
		}
		return nil, mapErr(err)
	}
	return &LoggedChange{msg: m}, nil
}

// Stop stops pulling and lets the changes in hand be acknowledged.
func (l *ChangeLog) Stop() { l.iter.Drain() }

// Backlog is how many changes wait for the relay (pending plus unacked).
func (l *ChangeLog) Backlog(ctx context.Context) (uint64, error) {
	info, err := l.cons.Info(ctx)
	if err != nil {
		return 0, mapErr(err)
	}
	return info.NumPending + uint64(info.NumAckPending), nil
}

// State says, for a log line, where the consumer stands on the server:
// the pull requests it holds, the changes delivered and not acknowledged,
// those not delivered yet, and its last delivery (a stalled pull shows as
// no waiting request with changes pending).
func (l *ChangeLog) State(ctx context.Context) []any {
	info, err := l.cons.Info(ctx)
	if err != nil {
		return []any{"consumer_err", mapErr(err)}
	}
	last := "never"
	if info.Delivered.Last != nil {
		last = time.Since(*info.Delivered.Last).Round(time.Millisecond).String() + " ago"
	}
	return []any{"waiting", info.NumWaiting, "ack_pending", info.NumAckPending,
		"pending", info.NumPending, "redelivered", info.NumRedelivered, "last_delivery", last}
}

// LoggedChange is one delivered change of the record change log. Every one
// must end in Ack, Nak or Term.
type LoggedChange struct {
	msg jetstream.Msg
}

// Subject names the change in logs.
func (c *LoggedChange) Subject() string { return c.msg.Subject() }

// Deleted reports a deletion, purge or expiry of the record: nothing to
// announce.
func (c *LoggedChange) Deleted() bool {
	h := c.msg.Headers()
	return kvOperation(h) != "" || (h != nil && h.Get(jetstream.MarkerReasonHeader) != "")
}

// Record decodes the record as of this change; its revision is the change's
// stream sequence.
func (c *LoggedChange) Record() (*job.Record, error) {
	md, err := c.msg.Metadata()
	if err != nil {
		return nil, fmt.Errorf("change %s: %w", c.msg.Subject(), err)
	}
	return codec.UnmarshalRecord(c.msg.Data(), md.Sequence.Stream)
}

// Ack marks the change relayed.
func (c *LoggedChange) Ack() error { return c.msg.Ack() }

// Nak has the change delivered again after delay.
func (c *LoggedChange) Nak(delay time.Duration) error { return c.msg.NakWithDelay(delay) }

// Stored is when the change was stored.
func (c *LoggedChange) Stored() time.Time {
	if md, err := c.msg.Metadata(); err == nil {
		return md.Timestamp
	}
	return time.Time{}
}

// Term drops the change for good.
func (c *LoggedChange) Term(reason string) error { return c.msg.TermWithReason(reason) }

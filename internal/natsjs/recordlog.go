package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// RecordLog reads the job records' change log (the stream under the
// JOBGATE_JOBS bucket) from a stream sequence on, through one ordered
// consumer of this process alone: the gateways' query indexes
// (internal/index) are derived from it. A change's Revision is its stream
// sequence, which is also the record's revision.
type RecordLog struct {
	iter jetstream.MessagesContext
}

// LogBounds are the first and last stream sequences the change log holds
// (Last 0: nothing was ever stored).
type LogBounds struct{ First, Last uint64 }

// LogBounds reports what the change log holds now.
func (s *Store) LogBounds(ctx context.Context) (LogBounds, error) {
	if s.js == nil {
		return LogBounds{}, errors.New("record log: store has no JetStream handle")
	}
	st, err := s.js.Stream(ctx, jobsStream)
	if err != nil {
		return LogBounds{}, fmt.Errorf("record log: %w", unavailable(err))
	}
	info, err := st.Info(ctx)
	if err != nil {
		return LogBounds{}, fmt.Errorf("record log: %w", unavailable(err))
	}
	return LogBounds{First: info.State.FirstSeq, Last: info.State.LastSeq}, nil
}

// ReadLog starts reading every change stored at stream sequence from or
// later (from 0 or 1: all the log holds), deletions and expiries included.
func (s *Store) ReadLog(ctx context.Context, from uint64) (*RecordLog, error) {
	if s.js == nil {
		return nil, errors.New("record log: store has no JetStream handle")
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{jobChangesPrefix + ">"}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if from > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := s.js.OrderedConsumer(ctx, jobsStream, cfg)
	if err != nil {
		return nil, fmt.Errorf("record log: %w", unavailable(err))
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		return nil, fmt.Errorf("record log: %w", unavailable(err))
	}
	return &RecordLog{iter: iter}, nil
}

// Next waits for the next change. After Stop it returns ErrFeedStopped.
func (l *RecordLog) Next() (RecordChange, error) {
	for {
		m, err := l.iter.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return RecordChange{}, ErrFeedStopped
			}
			return RecordChange{}, mapErr(err)
		}
		meta, err := m.Metadata()
		if err != nil {
			continue // not a stream message
		}
		key, ok := strings.CutPrefix(m.Subject(), jobChangesPrefix)
		if !ok {
			continue
		}
		c := RecordChange{Key: key, Revision: meta.Sequence.Stream}
		h := m.Headers()
		switch {
		case h.Get("KV-Operation") == "DEL" || h.Get("KV-Operation") == "PURGE" || h.Get("Nats-Marker-Reason") != "" || len(m.Data()) == 0:
			c.Deleted = true
		default:
			c.data = m.Data()
		}
		return c, nil
	}
}

// Stop ends the read; a Next waiting returns ErrFeedStopped.
func (l *RecordLog) Stop() { l.iter.Stop() }

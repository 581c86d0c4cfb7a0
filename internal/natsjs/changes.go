package natsjs

import (
	"context"
	"fmt"

	"github.com/jobgate/jobgate/internal/codec"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RecordChange is one stored change of a job record, as the change feed
// delivers it. The record is decoded only on demand: a watcher of every
// change usually wants few of them.
type RecordChange struct {
	Key      string // the record key, tenant.requester.id
	Revision uint64
	// Deleted: the record was deleted or expired (Follow only).
	Deleted bool
	// Synced marks the end of the current records (Follow only): it carries
	// no record, every record stored when the watch began came before it.
	Synced bool
	data   []byte
}

// ChangeOf is the change that stored r at r.Revision, as a watch delivers
// it (stubs of a watch in tests).
func ChangeOf(r *job.Record) (RecordChange, error) {
	data, err := codec.MarshalRecord(r)
	if err != nil {
		return RecordChange{}, err
	}
	return RecordChange{Key: r.Key(), Revision: r.Revision, data: data}, nil
}

// Record decodes the changed record.
func (c RecordChange) Record() (*job.Record, error) { return codec.UnmarshalRecord(c.data, c.Revision) }

// RecordWatch follows the changes of every job record from the moment it was
// started: one ordered consumer, whatever the number of records.
type RecordWatch struct {
	w      jetstream.KeyWatcher
	cancel context.CancelFunc
	ch     chan RecordChange
}

// WatchChanges starts following every stored change (puts only; deletions
// and expiries are not changes of a job). The watch is in place when it
// returns, so a read made afterwards cannot miss a change. Stop ends it.
func (s *Store) WatchChanges() (*RecordWatch, error) {
	// The context lives as long as the watch: its subscription ends with it.
	ctx, cancel := context.WithCancel(context.Background())
	w, err := s.kv.WatchAll(ctx, jetstream.UpdatesOnly(), jetstream.IgnoreDeletes())
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch jobs: %w", unavailable(err))
	}
	rw := &RecordWatch{w: w, cancel: cancel, ch: make(chan RecordChange, 64)}
	go rw.run(ctx, false)
	return rw, nil
}

// Follow delivers every current record, then a Synced marker, then every
// change as it is stored, deletions and expiries included, until ctx ends
// or Stop.
func (s *Store) Follow(ctx context.Context) (*RecordWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w, err := s.kv.WatchAll(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch jobs: %w", unavailable(err))
	}
	rw := &RecordWatch{w: w, cancel: cancel, ch: make(chan RecordChange, 64)}
	go rw.run(ctx, true)
	return rw, nil
}

func (rw *RecordWatch) run(ctx context.Context, all bool) {
	defer close(rw.ch)
	for e := range rw.w.Updates() {
		var c RecordChange
		switch {
		case e == nil && all:
			c.Synced = true
		case e == nil:
			continue
		case e.Operation() != jetstream.KeyValuePut && all:
			c = RecordChange{Key: e.Key(), Revision: e.Revision(), Deleted: true}
		case e.Operation() != jetstream.KeyValuePut:
			continue
		default:
			c = RecordChange{Key: e.Key(), Revision: e.Revision(), data: e.Value()}
		}
		select {
		case rw.ch <- c:
		case <-ctx.Done():
			return
		}
	}
}

// Changes delivers the changes in stream order; it is closed after Stop.
func (rw *RecordWatch) Changes() <-chan RecordChange { return rw.ch }

// Stop ends the watch.
func (rw *RecordWatch) Stop() {
	_ = rw.w.Stop()
	rw.cancel()
}

// Ping says whether the store answers: the connection is up and the bucket
// replies to a status request.
func (s *Store) Ping(ctx context.Context) error {
	if s.nc != nil && s.nc.Status() != nats.CONNECTED {
		return fmt.Errorf("%w: nats connection %s", job.ErrUnavailable, s.nc.Status())
	}
	if _, err := s.kv.Status(ctx); err != nil {
		return fmt.Errorf("job bucket: %w", unavailable(err))
	}
	return nil
}

package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/internal/codec"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/retry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Store errors, next to the store that returns them.
var (
	// ErrExists: a create found the key taken (a duplicate admission).
	ErrExists = errors.New("record exists")
	// ErrStale: a compare-and-set lost against a newer revision.
	ErrStale = errors.New("record changed concurrently")
)

// Store keeps job records in the JOBGATE_JOBS bucket. Its errors wrap
// job.ErrNotFound, job.ErrUnavailable, ErrExists and ErrStale.
type Store struct {
	// reads counts the records read (Get, and every record List returns),
	// so tests can tell what a request cost.
	reads atomic.Uint64
	kv    jetstream.KeyValue
	ttl   time.Duration
	nc    *nats.Conn          // for Ping; nil in a Store built without a connection
	js    jetstream.JetStream // for the change log consumer
}

// KV exposes the bucket for watchers (the gateway's change feed, sweepers).
func (s *Store) KV() jetstream.KeyValue { return s.kv }

// Create writes a new record, create-only: of any number of concurrent
// creates of one key exactly one succeeds, the rest get ErrExists. This is
// the admission commit.
func (s *Store) Create(ctx context.Context, r *job.Record) error {
	data, err := codec.MarshalRecord(r)
	if err != nil {
		return fmt.Errorf("encode job %s: %w", r.ID, err)
	}
	key := r.Key()
	rev, err := s.put(ctx, key, data, 0, s.ttl)
	if wrongLastSeq(err) {
		// Taken, or only a deletion marker is left (a record deleted or
		// expired): nats.go's create tells the two apart and writes over
		// the marker.
		rev, err = s.kv.Create(ctx, key, data, jetstream.KeyTTL(s.ttl))
	}
	if err != nil {
		return mapErr(err)
	}
	r.Revision = rev
	return nil
}

// TTL is the records' retention (the layout's JobTTL): a record lives this
// long after its last write, which renews it.
func (s *Store) TTL() time.Duration { return s.ttl }

// Reads is the number of records read so far (tests).
func (s *Store) Reads() uint64 { return s.reads.Load() }

// Get reads the current record under key.
func (s *Store) Get(ctx context.Context, key string) (*job.Record, error) {
	s.reads.Add(1)
	e, err := s.kv.Get(ctx, key)
	if err != nil {
		return nil, mapErr(err)
	}
	r, err := codec.UnmarshalRecord(e.Value(), e.Revision())
	if err != nil {
		return nil, fmt.Errorf("decode job %s: %w", key, err)
	}
	return r, nil
}

// Update writes r if the stored revision is still r.Revision, and sets
// r.Revision to the new one. A lost race is ErrStale.
func (s *Store) Update(ctx context.Context, r *job.Record) error {
	data, err := codec.MarshalRecord(r)
	if err != nil {
		return fmt.Errorf("encode job %s: %w", r.ID, err)
	}
	rev, err := s.put(ctx, r.Key(), data, r.Revision, 0)
	if wrongLastSeq(err) {
		return fmt.Errorf("%w: %w", ErrStale, err)
	}
	if err != nil {
		return mapErr(err)
	}
	r.Revision = rev
	return nil
}

// put writes data under key if the key's last revision is expect (0: it
// has none), with a time to live when ttl is set: the bucket's own write,
// as jetstream.KeyValue's Create and Update make it, its answer read by
// publishMsg (decoding it with encoding/json cost about 2% of the
// pipeline's CPU: a job is three record writes). A lost compare-and-set is
// a *jetstream.APIError that wrongLastSeq reports.
func (s *Store) put(ctx context.Context, key string, data []byte, expect uint64, ttl time.Duration) (uint64, error) {
	if !kvKeyValid(key) {
		return 0, jetstream.ErrInvalidKey
	}
	msg := &nats.Msg{Subject: jobChangesPrefix + key, Data: data, Header: nats.Header{
		jetstream.ExpectedLastSubjSeqHeader: []string{strconv.FormatUint(expect, 10)},
	}}
	if ttl > 0 {
		msg.Header[jetstream.MsgTTLHeader] = []string{ttl.String()}
	}
	ack, err := publishMsg(ctx, s.js, msg)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// wrongLastSeq reports a write refused because the key's last revision was
// not the one expected (replicated streams answer with their own code).
func wrongLastSeq(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Mutate applies fn to a fresh copy of the record under key and writes it by
// compare-and-set, retrying on lost races. If fn returns an error nothing is
// written and that error is returned (with the record as read).
func (s *Store) Mutate(ctx context.Context, key string, fn func(r *job.Record) error) (*job.Record, error) {
	for i := 0; ; i++ {
		cur, err := s.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		next := cur.Clone()
		if err := fn(next); err != nil {
			return cur, err
		}
		err = s.Update(ctx, next)
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, ErrStale) || i >= 50 {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// FindInTenant finds a job of any requester of tenant by id (admin reads).
func (s *Store) FindInTenant(ctx context.Context, tenant, id string) (*job.Record, error) {
	lister, err := s.kv.ListKeysFiltered(ctx, tenant+".*."+id)
	if err != nil {
		return nil, mapErr(err)
	}
	defer lister.Stop() //nolint:errcheck
	for key := range lister.Keys() {
		return s.Get(ctx, key)
	}
	return nil, fmt.Errorf("job %s: %w", id, job.ErrNotFound)
}

// List returns the current records of a requester, or of a whole tenant when
// requester is "". Order is unspecified; callers sort.
func (s *Store) List(ctx context.Context, tenant, requester string) ([]*job.Record, error) {
	filter := tenant + ".*.*"
	if requester != "" {
		filter = tenant + "." + requester + ".*"
	}
	w, err := s.kv.WatchFiltered(ctx, []string{filter}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, mapErr(err)
	}
	defer w.Stop() //nolint:errcheck
	var out []*job.Record
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("list jobs: %w: %w", job.ErrUnavailable, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return out, nil
			}
			if e == nil { // end of the initial values
				return out, nil
			}
			s.reads.Add(1)
			r, err := codec.UnmarshalRecord(e.Value(), e.Revision())
			if err != nil {
				continue
			}
			out = append(out, r)
		}
	}
}

// mapErr turns JetStream errors into the domain's and the store's sentinels.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	// A lost compare-and-set matches ErrKeyExists too (same server error
	// code), so it must be told apart first.
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return fmt.Errorf("%w: %w", ErrStale, err)
	case errors.Is(err, jetstream.ErrKeyExists):
		return fmt.Errorf("%w: %w", ErrExists, err)
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return fmt.Errorf("%w: %w", job.ErrNotFound, err)
	case StorageFull(err): // answered 503 too, so before Unavailable
		return fmt.Errorf("%w: %w", job.ErrStorageFull, err)
	case Unavailable(err):
		return fmt.Errorf("%w: %w", job.ErrUnavailable, err)
	}
	return err
}

// StorageFull reports whether err is JetStream refusing a write because the
// stream is at its byte budget ("maximum bytes exceeded"): nothing written,
// and trying again helps only once space is freed.
func StorageFull(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jsErrMaxBytes
}

// jsErrMaxBytes is JetStream's error code for a write past a stream's
// MaxBytes with discard new.
const jsErrMaxBytes = 10077

// Unavailable reports whether err means JetStream could not be reached or did
// not answer in time, so nothing is known to have been written.
func Unavailable(err error) bool {
	// A cluster answers 503 while a stream or the meta layer elects a
	// leader (e.g. "JetStream system temporarily unavailable", "expected
	// last sequence per subject temporarily unavailable"): nothing written.
	var api *jetstream.APIError
	if errors.As(err, &api) && api.Code == 503 {
		return true
	}
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrConnectionClosed) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, jetstream.ErrJetStreamNotEnabled)
}

// StartBound bounds a service's whole start (its consumer creates, each
// tried again within it): a process that cannot start says so instead of
// waiting for ever.
const StartBound = 30 * time.Second

// StartTry bounds one try of a JetStream call a service makes while it
// starts (a consumer create, say): a cluster operation whose answer a
// leader change can lose, so a call waiting for it would use up the whole
// start bound. With UntilAvailable, a try that hears nothing is made again.
const StartTry = 5 * time.Second

// UntilAvailable runs op, each try bounded by try, and again while its
// error says JetStream was unavailable (Unavailable, or job.ErrUnavailable
// as the adapters map it), until it succeeds, fails for good, or ctx ends.
// A cluster electing a leader answers "unavailable", or loses the answer
// to a request altogether, for a few seconds: a call that waited for a lost
// answer would use up the caller's whole bound.
func UntilAvailable(ctx context.Context, try time.Duration, op func(context.Context) error) error {
	return retry.Until(ctx, retry.Policy{First: 100 * time.Millisecond, Limit: 2 * time.Second, Try: try,
		Retryable: func(err error) bool { return Unavailable(err) || errors.Is(err, job.ErrUnavailable) }}, op)
}

// kvKeyValid is nats.go's rule for a key (letters, digits and -/_=., no
// empty token), so a write this store makes itself goes where
// jetstream.KeyValue's would, or nowhere.
func kvKeyValid(key string) bool {
	if key == "" || key[0] == '.' || key[len(key)-1] == '.' || strings.Contains(key, "..") {
		return false
	}
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '/', c == '_', c == '=', c == '.':
		default:
			return false
		}
	}
	return true
}

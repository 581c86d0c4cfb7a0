package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/nats-io/nats.go/jetstream"
)

// PresenceTTL is how long a worker process counts as live after its last
// announcement; workers announce themselves every PresenceTTL/3.
const PresenceTTL = 30 * time.Second

// Presence is what a live worker process says about itself, per job type.
type Presence struct {
	Worker      string    `json:"worker"`
	Type        string    `json:"type"`
	Concurrency int       `json:"concurrency"`
	StartedAt   time.Time `json:"started_at"`
	SeenAt      time.Time `json:"seen_at"`
	// Credential is the id of the worker credential the process signed in
	// with (empty in the presence of brokers of earlier versions).
	Credential string `json:"credential,omitempty"`
	// Busy is how many of the type's jobs the process was running at its
	// last hello, as it said (nil: a worker of an earlier protocol
	// revision, which does not say).
	Busy *int `json:"busy,omitempty"`
}

// TypeStore keeps the job type declarations (JOBGATE_TYPES, one entry per
// type, written by its workers) and the presence of worker processes
// (JOBGATE_WORKERS, one expiring entry per type and worker).
type TypeStore struct {
	types   jetstream.KeyValue
	workers jetstream.KeyValue
}

// Declare stores a type's declaration, replacing an earlier one whatever
// its owner (jobgate's own declarations): the worker that started last
// speaks for the type. An operator's pause stays as it is.
func (s *TypeStore) Declare(ctx context.Context, d *job.TypeDecl) error {
	return s.declare(ctx, d, false)
}

func sameDecl(a, b *job.TypeDecl) bool {
	x, y := *a, *b
	x.DeclaredAt, y.DeclaredAt = time.Time{}, time.Time{}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

// Get reads one declaration.
func (s *TypeStore) Get(ctx context.Context, name string) (*job.TypeDecl, error) {
	e, err := s.types.Get(ctx, name)
	if err != nil {
		return nil, mapErr(err)
	}
	return decodeDecl(e.Value())
}

func decodeDecl(data []byte) (*job.TypeDecl, error) {
	var d job.TypeDecl
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("decode type declaration: %w", err)
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// TypeChange is one change of the declarations: a declaration, or the
// removal of the type named Removed.
type TypeChange struct {
	Decl    *job.TypeDecl
	Removed string
}

// WatchTypes sends every current declaration, then nil (caught up), then
// every change, until ctx ends. Undecodable entries are skipped.
func (s *TypeStore) WatchTypes(ctx context.Context, fn func(*TypeChange)) error {
	return watchBucket(ctx, s.types, func(e jetstream.KeyValueEntry) {
		switch {
		case e == nil:
			fn(nil)
		case e.Operation() != jetstream.KeyValuePut:
			fn(&TypeChange{Removed: e.Key()})
		default:
			if d, err := decodeDecl(e.Value()); err == nil && d.Name == e.Key() {
				fn(&TypeChange{Decl: d})
			}
		}
	})
}

// watchBucket hands fn every current entry of kv, then nil (caught up),
// then every change, from a goroutine that ends with ctx.
func watchBucket(ctx context.Context, kv jetstream.KeyValue, fn func(jetstream.KeyValueEntry)) error {
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return mapErr(err)
	}
	go func() {
		defer w.Stop() //nolint:errcheck
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				fn(e)
			}
		}
	}()
	return nil
}

// presenceKey is the workers bucket key of one worker of one type. Worker
// names are free text; only the characters a key allows are kept.
func presenceKey(typ, worker string) string {
	var b strings.Builder
	for _, c := range worker {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return typ + "." + b.String()
}

// Announce records that worker runs type now; it expires PresenceTTL later
// unless announced again.
func (s *TypeStore) Announce(ctx context.Context, p Presence) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if _, err := s.workers.Put(ctx, presenceKey(p.Type, p.Worker), data); err != nil {
		return fmt.Errorf("announce worker: %w", mapErr(err))
	}
	return nil
}

// Withdraw removes a worker's presence at once (a clean stop).
func (s *TypeStore) Withdraw(ctx context.Context, typ, worker string) error {
	if err := s.workers.Delete(ctx, presenceKey(typ, worker)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("withdraw worker: %w", mapErr(err))
	}
	return nil
}

// WatchWorkers sends every live presence, then nil, then every change (a
// removal as a Presence with a zero SeenAt), until ctx ends.
func (s *TypeStore) WatchWorkers(ctx context.Context, fn func(key string, p *Presence)) error {
	return watchBucket(ctx, s.workers, func(e jetstream.KeyValueEntry) {
		if e == nil {
			fn("", nil)
			return
		}
		var p Presence
		if e.Operation() == jetstream.KeyValuePut && json.Unmarshal(e.Value(), &p) == nil {
			fn(e.Key(), &p)
			return
		}
		fn(e.Key(), &Presence{})
	})
}

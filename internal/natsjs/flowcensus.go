package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The flow census: what the types' flow control holds back and holds, for
// the admin stats and the metrics, at a cost that does not grow with the
// jobs waiting. Each dispatcher writes what its broker has parked (the
// jobs waiting for a concurrency place or a rate token, per type and
// tenant) to one entry of JOBGATE_SLOTS, "fw.<census id>", again every few
// seconds; the entry of a dispatcher gone runs out with the bucket's age
// limit (SlotTTL). The places in use are read from the concurrency
// entries themselves ("fc.<type>.<class>.<digest>").

// FlowWaiting is the jobs held back by flow control, by type and tenant.
type FlowWaiting map[string]map[string]WaitingCounts

// WaitingCounts counts one tenant's held-back jobs of a type: waiting for
// a concurrency place, and for a rate token.
type WaitingCounts struct {
	Concurrency int `json:"c,omitempty"`
	Rate        int `json:"r,omitempty"`
}

const (
	waitingPrefix = "fw."
	placesPrefix  = "fc."
	// maxCensusEntries bounds the entries one census read looks at.
	maxCensusEntries = 100000
)

// PutWaiting writes one dispatcher's census entry (id: the dispatcher's
// census id, a NATS subject token); an empty census deletes it.
func (s *SlotStore) PutWaiting(ctx context.Context, id string, w FlowWaiting) error {
	key := waitingPrefix + id
	if len(w) == 0 {
		if err := s.kv.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("flow census %s: %w", key, mapErr(err))
		}
		return nil
	}
	data, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("flow census %s: %w", key, err)
	}
	if _, err := s.kv.Put(ctx, key, data); err != nil {
		return fmt.Errorf("flow census %s: %w", key, mapErr(err))
	}
	return nil
}

// Waiting reads the dispatchers' census entries, each count the largest
// any dispatcher gives (every dispatcher reads every lane, so each sees
// the same waiting jobs as far as it has read them).
func (s *SlotStore) Waiting(ctx context.Context) (FlowWaiting, error) {
	out := FlowWaiting{}
	err := s.scan(ctx, waitingPrefix+">", func(_ string, v []byte) {
		var w FlowWaiting
		if json.Unmarshal(v, &w) != nil {
			return // not a census entry (an endpoint type named fw's slot)
		}
		for typ, tenants := range w {
			for tenant, c := range tenants {
				if out[typ] == nil {
					out[typ] = map[string]WaitingCounts{}
				}
				have := out[typ][tenant]
				out[typ][tenant] = WaitingCounts{Concurrency: max(have.Concurrency, c.Concurrency), Rate: max(have.Rate, c.Rate)}
			}
		}
	})
	return out, err
}

// PlacesInUse counts the live concurrency places taken at now, by type and
// key class (tenant, requester, params).
func (s *SlotStore) PlacesInUse(ctx context.Context, now time.Time) (map[string]map[string]int, error) {
	out := map[string]map[string]int{}
	at := now.UnixMilli()
	err := s.scan(ctx, placesPrefix+">", func(key string, v []byte) {
		parts := strings.Split(key, ".")
		if len(parts) != 4 || parts[2] == "" {
			return
		}
		var e leaseEntry
		if json.Unmarshal(v, &e) != nil {
			return // not a concurrency entry (an endpoint type named fc's slot)
		}
		n := 0
		for _, until := range e {
			if until > at {
				n++
			}
		}
		if n == 0 {
			return
		}
		class := map[byte]string{'t': "tenant", 'r': "requester", 'p': "params"}[parts[2][0]]
		if class == "" {
			return
		}
		if out[parts[1]] == nil {
			out[parts[1]] = map[string]int{}
		}
		out[parts[1]][class] += n
	})
	return out, err
}

// scan reads the latest value of each key under filter, up to
// maxCensusEntries, in one pass of an ordered consumer.
func (s *SlotStore) scan(ctx context.Context, filter string, fn func(key string, v []byte)) error {
	w, err := s.kv.WatchFiltered(ctx, []string{filter}, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("flow census: %w", mapErr(err))
	}
	defer func() { _ = w.Stop() }()
	for n := 0; n < maxCensusEntries; n++ {
		select {
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				return nil // the current values all read
			}
			fn(e.Key(), e.Value())
		case <-ctx.Done():
			return fmt.Errorf("flow census: %w", ctx.Err())
		}
	}
	return nil
}

package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A type's concurrency key (api.ConcurrencyKey) is one entry of
// JOBGATE_SLOTS per key value: the places taken under it, each a holder
// (a claim of a job) with when its lease runs out. A place is taken,
// renewed and given back by compare-and-set on the entry, so that however
// many dispatchers start jobs, at most the limit hold a place at once. A
// holder that is never given back (its dispatcher and worker died) runs
// out SlotTTL after its last renewal, and the bucket forgets an entry no
// one wrote for SlotTTL, so nothing leaks past it. Any dispatcher renews
// or gives back any holder: the entry's key and the holder follow from
// the job's record, not from which process took the place.

// leaseTries bounds the compare-and-set rounds of one lease operation;
// past it the entry is too contended and the caller tries later.
const leaseTries = 10

// ErrLeaseBusy: the entry kept changing under the compare-and-set.
var ErrLeaseBusy = errors.New("concurrency entry kept changing")

// leaseEntry is an entry's value: holder → expiry (Unix milliseconds).
type leaseEntry map[string]int64

// Lease takes a place under key for holder, or renews the one it has,
// until now+SlotTTL; ErrNoSlot when limit other live holders have one.
func (s *SlotStore) Lease(ctx context.Context, key string, limit int, holder string, now time.Time) error {
	until := now.Add(SlotTTL).UnixMilli()
	return s.updateLeases(ctx, key, now, func(e leaseEntry) (bool, error) {
		if _, ok := e[holder]; !ok && len(e) >= limit {
			return false, ErrNoSlot
		}
		e[holder] = until
		return true, nil
	})
}

// Unlease gives back holder's place under key; one it does not have is
// not an error.
func (s *SlotStore) Unlease(ctx context.Context, key, holder string, now time.Time) error {
	return s.updateLeases(ctx, key, now, func(e leaseEntry) (bool, error) {
		if _, ok := e[holder]; !ok {
			return false, nil
		}
		delete(e, holder)
		return true, nil
	})
}

// Leased counts the live places taken under key.
func (s *SlotStore) Leased(ctx context.Context, key string, now time.Time) (int, error) {
	e, _, err := s.readLeases(ctx, key, now)
	return len(e), err
}

// updateLeases applies fn to key's live holders and writes the result when
// fn says it changed (an entry left empty is deleted).
func (s *SlotStore) updateLeases(ctx context.Context, key string, now time.Time, fn func(leaseEntry) (bool, error)) error {
	for range leaseTries {
		e, rev, err := s.readLeases(ctx, key, now)
		if err != nil {
			return err
		}
		changed, err := fn(e)
		if err != nil || !changed {
			return err
		}
		switch {
		case len(e) == 0 && rev == 0:
			return nil
		case len(e) == 0:
			err = s.kv.Delete(ctx, key, jetstream.LastRevision(rev))
		case rev == 0:
			data, _ := json.Marshal(e) // a map of strings to numbers
			_, err = s.kv.Create(ctx, key, data)
		default:
			data, _ := json.Marshal(e)
			_, err = s.kv.Update(ctx, key, data, rev)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return fmt.Errorf("concurrency entry %s: %w", key, mapErr(err))
		}
	}
	return fmt.Errorf("concurrency entry %s: %w", key, ErrLeaseBusy)
}

// readLeases reads key's live holders and the entry's revision (0: none).
// An entry that does not decode is treated as empty and overwritten: it
// can only be a torn write of an older version.
func (s *SlotStore) readLeases(ctx context.Context, key string, now time.Time) (leaseEntry, uint64, error) {
	kve, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return leaseEntry{}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("concurrency entry %s: %w", key, mapErr(err))
	}
	var e leaseEntry
	if json.Unmarshal(kve.Value(), &e) != nil || e == nil {
		e = leaseEntry{}
	}
	at := now.UnixMilli()
	for h, until := range e {
		if until <= at {
			delete(e, h)
		}
	}
	return e, kve.Revision(), nil
}

// TakeToken takes one token of the rate bucket under key (burst tokens,
// refilled at perSecond; the value is "tokens unixmillis"), by
// compare-and-set, so that across dispatchers the attempts started hold to
// the rate. With none to take it says how long until one is there. A
// bucket idle for SlotTTL is forgotten by the bucket's age limit and
// starts full again, which it would be by then (api.RateRefillSeconds).
func (s *SlotStore) TakeToken(ctx context.Context, key string, perSecond float64, burst int, now time.Time) (time.Duration, error) {
	for range leaseTries {
		tokens, rev, at := float64(burst), uint64(0), now.UnixMilli()
		kve, err := s.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		case err != nil:
			return 0, fmt.Errorf("rate bucket %s: %w", key, mapErr(err))
		default:
			rev = kve.Revision()
			if t, last, ok := parseBucket(kve.Value()); ok {
				// The bucket's clock never goes back: a dispatcher whose
				// now is behind the last writer's refills nothing, and
				// writes the later time, so no token is made twice.
				elapsed := max(now.Sub(time.UnixMilli(last)).Seconds(), 0)
				tokens = min(float64(burst), t+elapsed*perSecond)
				at = max(at, last)
			}
		}
		if tokens < 1 {
			return time.Duration((1 - tokens) / perSecond * float64(time.Second)), nil
		}
		data := strconv.AppendFloat(nil, tokens-1, 'f', 6, 64)
		data = append(data, ' ')
		data = strconv.AppendInt(data, at, 10)
		if rev == 0 {
			_, err = s.kv.Create(ctx, key, data)
		} else {
			_, err = s.kv.Update(ctx, key, data, rev)
		}
		if err == nil {
			return 0, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, fmt.Errorf("rate bucket %s: %w", key, mapErr(err))
		}
	}
	return 0, fmt.Errorf("rate bucket %s: %w", key, ErrLeaseBusy)
}

func parseBucket(v []byte) (float64, int64, bool) {
	for i, c := range v {
		if c == ' ' {
			t, err1 := strconv.ParseFloat(string(v[:i]), 64)
			at, err2 := strconv.ParseInt(string(v[i+1:]), 10, 64)
			return t, at, err1 == nil && err2 == nil
		}
	}
	return 0, 0, false
}

// Tokens reads the rate bucket under key without taking from it: the
// tokens it holds at now (a bucket never written, or forgotten, is full).
func (s *SlotStore) Tokens(ctx context.Context, key string, perSecond float64, burst int, now time.Time) (float64, error) {
	kve, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return float64(burst), nil
	}
	if err != nil {
		return 0, fmt.Errorf("rate bucket %s: %w", key, mapErr(err))
	}
	t, at, ok := parseBucket(kve.Value())
	if !ok {
		return float64(burst), nil
	}
	return min(float64(burst), t+max(now.Sub(time.UnixMilli(at)).Seconds(), 0)*perSecond), nil
}

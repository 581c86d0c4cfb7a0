package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
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
	ops := []LeaseOp{{Kind: LeaseTake, Holder: holder, Limit: limit}}
	if err := s.Apply(ctx, key, now, ops); err != nil {
		return err
	}
	return ops[0].Err
}

// ErrLapsed: the holder's place ran out (or was given back) before it was
// renewed; since then another holder may have had it.
var ErrLapsed = errors.New("concurrency place lapsed")

// Hold renews the place holder has under key until now+SlotTTL, and
// returns that time; ErrLapsed when holder has no live place there. A
// place is held without a break from its Lease to a Hold that succeeds: a
// place that ran out is never live again, so Hold is how an attempt proves
// it still has its place (a Lease would take a new one).
func (s *SlotStore) Hold(ctx context.Context, key, holder string, now time.Time) (time.Time, error) {
	ops := []LeaseOp{{Kind: LeaseHold, Holder: holder}}
	if err := s.Apply(ctx, key, now, ops); err != nil {
		return now.Add(SlotTTL), err
	}
	return now.Add(SlotTTL), ops[0].Err
}

// Unlease gives back holder's place under key; one it does not have is
// not an error.
func (s *SlotStore) Unlease(ctx context.Context, key, holder string, now time.Time) error {
	err := s.Yield(ctx, key, holder, now)
	if errors.Is(err, ErrLapsed) {
		return nil
	}
	return err
}

// Yield gives back holder's place under key; ErrLapsed when it had no live
// place there: the place ran out, or was given back, before now.
func (s *SlotStore) Yield(ctx context.Context, key, holder string, now time.Time) error {
	ops := []LeaseOp{{Kind: LeaseGive, Holder: holder}}
	if err := s.Apply(ctx, key, now, ops); err != nil {
		return err
	}
	return ops[0].Err
}

// LeaseKind is what a LeaseOp does to its holder's place.
type LeaseKind int

const (
	// LeaseTake takes a place for the holder, or renews the one it has,
	// until now+SlotTTL; ErrNoSlot when Limit other live holders have one.
	LeaseTake LeaseKind = iota + 1
	// LeaseHold renews the holder's live place until now+SlotTTL;
	// ErrLapsed when it has none (see Hold).
	LeaseHold
	// LeaseGive gives back the holder's place; ErrLapsed when it had no
	// live one.
	LeaseGive
)

// LeaseOp is one holder's operation on a key's places, and its outcome
// (Err: ErrNoSlot, ErrLapsed or nil), set by Apply.
type LeaseOp struct {
	Kind   LeaseKind
	Holder string
	Limit  int // LeaseTake's
	Err    error
}

// Apply applies ops, in their order, to key's live places at now, in one
// compare-and-set of the entry: what a dispatcher does to one key's
// places at about the same time (its starts, its attempts' renewals and
// the places its verdicts gave back) costs one write, not one each. Each
// op's outcome is in its Err; Apply's error is the store's (then no op
// was applied). A take or a hold holds until now+SlotTTL. An op that is
// refused is judged on the entry as stored, never only on this process's
// last sight of it.
func (s *SlotStore) Apply(ctx context.Context, key string, now time.Time, ops []LeaseOp) error {
	return s.updateLeases(ctx, key, now, func(e leaseEntry) (bool, bool) {
		until := now.Add(SlotTTL).UnixMilli()
		changed, refused := false, false
		for i := range ops {
			op := &ops[i]
			_, has := e[op.Holder]
			op.Err = nil
			switch op.Kind {
			case LeaseTake:
				if !has && len(e) >= op.Limit {
					op.Err, refused = ErrNoSlot, true
					continue
				}
				e[op.Holder], changed = until, true
			case LeaseHold:
				if !has {
					op.Err, refused = ErrLapsed, true
					continue
				}
				e[op.Holder], changed = until, true
			case LeaseGive:
				if !has {
					op.Err = ErrLapsed
					continue
				}
				delete(e, op.Holder)
				changed = true
			}
		}
		return changed, refused
	})
}

// LastLeased counts the live places under key as this process last wrote
// or read the entry, without a read (false: it knows none).
func (s *SlotStore) LastLeased(key string, now time.Time) (int, bool) {
	v, _, known := s.last.get(key)
	if !known {
		return 0, false
	}
	return len(liveLeases(v, now)), true
}

// Leased counts the live places taken under key.
func (s *SlotStore) Leased(ctx context.Context, key string, now time.Time) (int, error) {
	e, _, err := s.readLeases(ctx, key, now)
	return len(e), err
}

// updateLeases applies fn to key's live holders and writes the result when
// fn says it changed (an entry left empty is deleted). fn also says
// whether it refused something: judged on this process's last sight of
// the entry (which may be stale), a refusal, or no change, reads it again.
func (s *SlotStore) updateLeases(ctx context.Context, key string, now time.Time, fn func(leaseEntry) (changed, refused bool)) error {
	for try := range leaseTries {
		// The first try trusts the entry as this process last saw it; a
		// compare-and-set it loses reads it again.
		v, rev, known := s.last.get(key)
		var e leaseEntry
		if try == 0 && known {
			e = liveLeases(v, now)
		} else {
			var err error
			if e, rev, err = s.readLeases(ctx, key, now); err != nil {
				return err
			}
		}
		changed, refused := fn(e)
		if (refused || !changed) && try == 0 && known {
			continue // judged on what may be stale: read it
		}
		if !changed {
			return nil
		}
		var data []byte
		var nrev uint64
		var err error
		switch {
		case len(e) == 0 && rev == 0:
			return nil
		case len(e) == 0:
			err = s.kv.Delete(ctx, key, jetstream.LastRevision(rev))
		case rev == 0:
			data, _ = json.Marshal(e) // a map of strings to numbers
			nrev, err = s.kv.Create(ctx, key, data)
		default:
			data, _ = json.Marshal(e)
			nrev, err = s.kv.Update(ctx, key, data, rev)
		}
		if err == nil {
			s.last.put(key, data, nrev) // a delete forgets it (nrev 0)
			return nil
		}
		s.last.forget(key)
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
	s.last.put(key, kve.Value(), kve.Revision())
	return liveLeases(kve.Value(), now), kve.Revision(), nil
}

// liveLeases decodes an entry's value, keeping the holders live at now.
func liveLeases(v []byte, now time.Time) leaseEntry {
	var e leaseEntry
	if json.Unmarshal(v, &e) != nil || e == nil {
		e = leaseEntry{}
	}
	at := now.UnixMilli()
	for h, until := range e {
		if until <= at {
			delete(e, h)
		}
	}
	return e
}

// TakeToken takes one token of the rate bucket under key (burst tokens,
// refilled at perSecond; the value is "tokens unixmillis"), by
// compare-and-set, so that across dispatchers the attempts started hold to
// the rate. With none to take it says how long until one is there. A
// bucket idle for SlotTTL is forgotten by the bucket's age limit and
// starts full again, which it would be by then (api.RateRefillSeconds).
func (s *SlotStore) TakeToken(ctx context.Context, key string, perSecond float64, burst int, now time.Time) (time.Duration, error) {
	_, wait, err := s.TakeTokens(ctx, key, perSecond, burst, 1, now)
	return wait, err
}

// TakeTokens takes up to want tokens (at least 1) of the rate bucket under
// key in one compare-and-set, and says how many: want while the bucket
// keeps as many, else fewer, one when it holds less than want+1; with not
// even one to take, how long until one is there. A dispatcher takes a
// few starts' worth at once and hands them out itself (the broker's token
// batches), so that the bucket's one entry is not a write per start.
func (s *SlotStore) TakeTokens(ctx context.Context, key string, perSecond float64, burst, want int, now time.Time) (int, time.Duration, error) {
	want = max(want, 1)
	for try := range leaseTries {
		tokens, rev, at := float64(burst), uint64(0), now.UnixMilli()
		// The first try trusts the bucket as this process last saw it; a
		// compare-and-set it loses, or an empty bucket, reads it again.
		v, crev, cached := s.last.get(key)
		cached = cached && try == 0
		var err error
		if !cached {
			var kve jetstream.KeyValueEntry
			kve, err = s.kv.Get(ctx, key)
			if err == nil {
				v, crev = kve.Value(), kve.Revision()
				s.last.put(key, v, crev)
			}
		}
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		case err != nil:
			return 0, 0, fmt.Errorf("rate bucket %s: %w", key, mapErr(err))
		default:
			rev = crev
			if t, last, ok := parseBucket(v); ok {
				// The bucket's clock never goes back: a dispatcher whose
				// now is behind the last writer's refills nothing, and
				// writes the later time, so no token is made twice. It
				// counts whole milliseconds, as it is written: a refill
				// from an exact now would count the part of a millisecond
				// the last writer wrote off again, a few tokens a write at
				// thousands a second.
				elapsed := max(float64(at-last)/1000, 0)
				tokens = min(float64(burst), t+elapsed*perSecond)
				at = max(at, last)
			}
		}
		if tokens < 1 {
			if cached {
				continue
			}
			return 0, time.Duration((1 - tokens) / perSecond * float64(time.Second)), nil
		}
		// A batch leaves the bucket at least as many tokens as it takes:
		// near its limit a dispatcher takes one at a time, and holds no
		// token another dispatcher's start could have used.
		took := max(1, min(want, int(tokens)-want))
		data := strconv.AppendFloat(nil, tokens-float64(took), 'f', 6, 64)
		data = append(data, ' ')
		data = strconv.AppendInt(data, at, 10)
		var nrev uint64
		if rev == 0 {
			nrev, err = s.kv.Create(ctx, key, data)
		} else {
			nrev, err = s.kv.Update(ctx, key, data, rev)
		}
		if err == nil {
			s.last.put(key, data, nrev)
			return took, 0, nil
		}
		s.last.forget(key)
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, 0, fmt.Errorf("rate bucket %s: %w", key, mapErr(err))
		}
	}
	return 0, 0, fmt.Errorf("rate bucket %s: %w", key, ErrLeaseBusy)
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
	return min(float64(burst), t+max(float64(now.UnixMilli()-at)/1000, 0)*perSecond), nil
}

// lastSeen is the flow entries as this process last read or wrote them,
// by key: value and revision. It is only a guess (another process may
// have written since): a compare-and-set on it that loses reads again.
// At most maxLastSeen keys are kept; past it one is dropped at random.
type lastSeen struct {
	mu sync.Mutex
	m  map[string]seenEntry
}

type seenEntry struct {
	v   []byte
	rev uint64
}

const maxLastSeen = 10000

func (l *lastSeen) get(key string) ([]byte, uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[key]
	return e.v, e.rev, ok
}

// put notes key's value at rev; rev 0 (deleted) forgets it.
func (l *lastSeen) put(key string, v []byte, rev uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rev == 0 {
		delete(l.m, key)
		return
	}
	if l.m == nil {
		l.m = map[string]seenEntry{}
	}
	if _, ok := l.m[key]; !ok && len(l.m) >= maxLastSeen {
		for k := range l.m {
			delete(l.m, k)
			break
		}
	}
	l.m[key] = seenEntry{v: append([]byte(nil), v...), rev: rev}
}

func (l *lastSeen) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, key)
}

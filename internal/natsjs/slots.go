package natsjs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// SlotTTL is how long a slot stays taken after its holder last renewed
// it (the bucket's age limit): a crashed holder's slots come back within
// it, and the server's expiry pass a second or so after, within the 30 s
// the contract promises.
const SlotTTL = 25 * time.Second

// ErrNoSlot: every slot of the type is taken.
var ErrNoSlot = errors.New("no free slot")

// SlotStore leases the request slots of endpoint types (JOBGATE_SLOTS),
// and the concurrency places and rate buckets of the types' flow control
// (leases.go):
// slot n of type T is the key T.n, taken by a create-only write and held
// by rewriting it (compare-and-set on its revision) well within SlotTTL,
// the bucket's age limit. Whatever the number of dispatchers, at most
// limit slots of a type are held at once: the bound of its requests in
// flight across the deployment.
type SlotStore struct {
	kv jetstream.KeyValue
	// last holds the entries of the flow keys as this process last read
	// or wrote them (leases.go), so that a compare-and-set on a key this
	// process wrote last needs no read first.
	last lastSeen
}

// Slot is one slot held.
type Slot struct {
	Key      string
	Revision uint64
}

// Acquire takes a free slot of typ among its first limit ones for holder,
// trying them from a random one on; ErrNoSlot when all are taken.
func (s *SlotStore) Acquire(ctx context.Context, typ string, limit int, holder string) (Slot, error) {
	start := rand.IntN(limit)
	for i := range limit {
		key := typ + "." + strconv.Itoa((start+i)%limit)
		rev, err := s.kv.Create(ctx, key, []byte(holder))
		if err == nil {
			return Slot{Key: key, Revision: rev}, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return Slot{}, fmt.Errorf("take slot %s: %w", key, mapErr(err))
		}
	}
	return Slot{}, ErrNoSlot
}

// Renew keeps a slot held for another SlotTTL; ErrStale when it expired
// meanwhile (and may be someone else's).
func (s *SlotStore) Renew(ctx context.Context, slot Slot, holder string) (Slot, error) {
	rev, err := s.kv.Update(ctx, slot.Key, []byte(holder), slot.Revision)
	if err != nil {
		return slot, fmt.Errorf("renew slot %s: %w", slot.Key, mapErr(err))
	}
	return Slot{Key: slot.Key, Revision: rev}, nil
}

// Release frees a slot held, unless it expired and was taken since.
func (s *SlotStore) Release(ctx context.Context, slot Slot) error {
	err := s.kv.Delete(ctx, slot.Key, jetstream.LastRevision(slot.Revision))
	if err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("release slot %s: %w", slot.Key, mapErr(err))
	}
	return nil
}

// TakeRate takes up to want of the limit requests typ may start in the
// one-second window (its Unix second), by compare-and-set on the
// window's counter (key T.rate.<window>, gone with the bucket's age
// limit), and returns how many it got: 0 when the window is spent.
// Whatever the number of dispatchers, at most limit are taken a window.
func (s *SlotStore) TakeRate(ctx context.Context, typ string, window int64, want, limit int) (int, error) {
	key := typ + ".rate." + strconv.FormatInt(window, 10)
	for range 10 {
		e, err := s.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			n := min(want, limit)
			if _, err := s.kv.Create(ctx, key, []byte(strconv.Itoa(n))); err != nil {
				if errors.Is(err, jetstream.ErrKeyExists) {
					continue
				}
				return 0, fmt.Errorf("rate window %s: %w", key, mapErr(err))
			}
			return n, nil
		}
		if err != nil {
			return 0, fmt.Errorf("rate window %s: %w", key, mapErr(err))
		}
		used, err := strconv.Atoi(string(e.Value()))
		if err != nil || used >= limit {
			return 0, nil
		}
		n := min(want, limit-used)
		if _, err := s.kv.Update(ctx, key, []byte(strconv.Itoa(used+n)), e.Revision()); err != nil {
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
				continue
			}
			return 0, fmt.Errorf("rate window %s: %w", key, mapErr(err))
		}
		return n, nil
	}
	return 0, fmt.Errorf("rate window %s: %w", key, ErrStale)
}

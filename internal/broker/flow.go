package broker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// A type's flow control (api.Flow) is enforced where a job starts: the
// claim. Before it writes a claim, the broker takes a place under each of
// the job's concurrency keys and a token of its rate bucket, all in
// JOBGATE_SLOTS by compare-and-set (natsjs.SlotStore), so the limits hold
// whichever dispatcher starts the job. A job that finds a key full or the
// bucket empty is not claimed and costs no attempt: its work message is
// parked (park.go) and the lane goes on with its other messages, so a job
// at its limit blocks neither its lane nor other keys. A place is held by
// the claim (its ClaimID), renewed by the job's beats on any broker, and
// given back at the attempt's verdict, at a takeover, and when a broker
// finds the job ended; one never given back runs out SlotTTL after its
// last renewal.

// What a start waits for, as the job resource's waiting_for says it.
const (
	blockedConcurrency = "concurrency"
	blockedRate        = "rate limit"
)

// flowKey is one limit a start must pass (job.FlowKeys).
type flowKey = job.FlowKey

// flowKeys are the limits rec's starts pass under d.
func flowKeys(d *job.TypeDecl, rec *job.Record) []flowKey { return job.FlowKeys(d, rec) }

// flowBlock is why a start did not pass its limits: the key it waits on,
// what for (blockedConcurrency or blockedRate) and when to look again.
type flowBlock struct {
	key   string
	why   string
	delay time.Duration
}

// admit takes rec's places and a rate token for the claim holder before
// the claim is written, at now (the claim's start); on a block (or an error) it gives back what it
// took. The rate token is taken last: a job that waits for a place spends
// none.
func (b *Broker) admit(ctx context.Context, typ string, keys []flowKey, holder string, now time.Time) *flowBlock {
	var taken []flowKey
	undo := func() { b.unlease(ctx, taken, holder) }
	for _, k := range keys {
		if k.Rate != nil {
			unlock := b.flowKeys.lock(k.Key)
			wait, err := b.stores.Slots.TakeToken(ctx, k.Key, k.Rate.PerSecond, k.Rate.BurstOr(), now)
			unlock()
			if err != nil || wait > 0 {
				undo()
				b.flowHeldBack(typ, k.Class)
				return &flowBlock{key: k.Key, why: blockedRate, delay: max(wait, time.Millisecond) + jitter(20*time.Millisecond) + blockErr(err)}
			}
			continue
		}
		unlock := b.flowKeys.lock(k.Key)
		err := b.stores.Slots.Lease(ctx, k.Key, k.Limit, holder, now)
		unlock()
		if err != nil {
			undo()
			b.flowHeldBack(typ, k.Class)
			return &flowBlock{key: k.Key, why: blockedConcurrency, delay: probeEvery + blockErr(err)}
		}
		taken = append(taken, k)
	}
	if b.cfg.OnFlowPlace != nil {
		for _, k := range taken {
			b.cfg.OnFlowPlace(typ, k.Class)
		}
	}
	return nil
}

func (b *Broker) flowHeldBack(typ, class string) {
	if b.cfg.OnFlowHeldBack != nil {
		b.cfg.OnFlowHeldBack(typ, class)
	}
}

// blockErr is the extra wait of a block that came from a store error
// rather than a limit.
func blockErr(err error) time.Duration {
	if err == nil || errors.Is(err, natsjs.ErrNoSlot) {
		return 0
	}
	return outageDelay(1)
}

// unlease gives back holder's places under keys (best effort: a place not
// given back runs out SlotTTL after its last renewal).
func (b *Broker) unlease(ctx context.Context, keys []flowKey, holder string) {
	if holder == "" {
		return
	}
	for _, k := range keys {
		if k.Rate != nil {
			continue
		}
		unlock := b.flowKeys.lock(k.Key)
		err := b.stores.Slots.Unlease(ctx, k.Key, holder, b.cfg.Now())
		unlock()
		if err != nil {
			b.log.Debug("concurrency place not given back, it runs out", "key", k.Key, "err", err)
		}
	}
}

// release gives back the places of rec's current claim under d, when d
// has concurrency keys: its attempt ended, or a broker found it ended.
func (b *Broker) release(ctx context.Context, d *job.TypeDecl, rec *job.Record) {
	if d == nil || rec == nil || len(d.Concurrency) == 0 || rec.ClaimID == "" {
		return
	}
	keys := flowKeys(d, rec)
	b.unlease(ctx, keys, rec.ClaimID)
	if s := b.schedOf(rec.Type); s != nil {
		for _, k := range keys {
			if k.Rate == nil {
				s.unpark(k.Key)
			}
		}
	}
}

// renew keeps the places of a running claim, on its beats. A place lost
// meanwhile (the lease ran out, say while no broker ran) is taken again if
// there is room; without room the attempt runs on over the limit, which
// is logged: it cannot be stopped from here.
func (b *Broker) renew(ctx context.Context, d *job.TypeDecl, rec *job.Record) {
	if len(d.Concurrency) == 0 || rec.ClaimID == "" {
		return
	}
	now := b.cfg.Now()
	if !b.renewals.due(rec.ClaimID, now) {
		return
	}
	for _, k := range flowKeys(d, rec) {
		if k.Rate != nil {
			continue
		}
		unlock := b.flowKeys.lock(k.Key)
		err := b.stores.Slots.Lease(ctx, k.Key, k.Limit, rec.ClaimID, now)
		unlock()
		if errors.Is(err, natsjs.ErrNoSlot) {
			b.log.Warn("a running attempt lost its concurrency place", "job_id", rec.ID, "type", rec.Type, "class", k.Class)
		} else if err != nil {
			b.log.Debug("concurrency place not renewed", "job_id", rec.ID, "err", err)
		}
	}
}

// renewEvery: a broker renews a claim's places at most this often (its
// beats come every few seconds, each a write of the key's entry
// otherwise), well within SlotTTL even when its beats reach it only.
const renewEvery = natsjs.SlotTTL / 4

// maxRenewals bounds the claims whose last renewal a broker remembers;
// past it the stale ones are dropped (one forgotten is renewed again).
const maxRenewals = 100000

// renewals is when this broker last renewed each claim's places.
type renewals struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// due reports whether claim's places are due for renewal at now, and if so
// notes it renewed.
func (r *renewals) due(claim string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.last[claim]) < renewEvery {
		return false
	}
	if r.last == nil {
		r.last = map[string]time.Time{}
	}
	if len(r.last) >= maxRenewals {
		for c, at := range r.last {
			if now.Sub(at) >= renewEvery {
				delete(r.last, c)
			}
		}
	}
	r.last[claim] = now
	return true
}

// keyLocks serializes this broker's compare-and-sets on each flow key: a
// key's entry (a concurrency key's places, a rate bucket) is one value
// every start of its jobs writes, and the broker's requests racing on it
// would lose their compare-and-sets to each other, run out of tries
// (natsjs.ErrLeaseBusy) and park their jobs as if the store were out; one
// at a time, each costs a read and a write, and only other dispatchers
// race it. The keys share keyStripes locks by hash.
type keyLocks struct {
	stripes [keyStripes]sync.Mutex
}

const keyStripes = 64

// lock takes key's lock and returns its unlock.
func (l *keyLocks) lock(key string) func() {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	m := &l.stripes[h%keyStripes]
	m.Lock()
	return m.Unlock
}

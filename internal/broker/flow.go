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
// finds the job ended (written with the broker's next write on the key,
// within releaseDelay: flowbatch.go); one never given back runs out
// SlotTTL after its last renewal.

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

// placement is what admit took for a claim's concurrency keys: the name
// its places are held under, until when they are held for sure, and the
// key's limit they were taken under (0: not to be handed on; see spare).
// kept: the places are those of the claim taken over, renewed for the new
// one; should the new claim's write fail they are not its to give back
// (the claim it lost to, an attempt's verdict, may have handed them on).
// drop: the claim taken over, whose places (some lapsed) go back once the
// new claim is written (done).
type placement struct {
	holder string
	until  time.Time
	limit  int
	kept   bool
	drop   string
}

// written is what follows a claim's write under keys, placed as pl: if
// another claim won (stale), the places it took go back (not those it
// kept); once it is written, those of the claim it took over that were
// not kept go back, and this broker notes until when its places are held.
func (b *Broker) written(ctx context.Context, keys []flowKey, pl placement, stale bool, now time.Time) {
	if pl.holder == "" || len(concurrencyKeys(keys)) == 0 {
		return
	}
	switch {
	case stale:
		if !pl.kept {
			b.unlease(ctx, keys, pl.holder)
		}
	default:
		if pl.drop != "" {
			b.unlease(ctx, keys, pl.drop)
		}
		b.renewals.note(pl.holder, pl.until, pl.limit, now)
	}
}

// admit takes next's places and a rate token before its claim is written,
// at now (the claim's start); cur is the job as read, a running claim of
// which (a takeover, a lost claim handed out again) keeps its places for
// next. The places are, in this order of preference:
//
//   - cur's, renewed (natsjs.LeaseHold): a claim taken over holds the
//     places of the one it replaces, which no one else may take meanwhile;
//     lapsed, they are taken afresh;
//   - a spare (flowbatch.go): a place this broker was given back at the
//     verdict of another attempt under the same single key and limit,
//     still held for longer than leaseWindow, handed on with no write;
//   - taken afresh for next.ClaimID, in the next write on the key with
//     what else this broker has for it (placeQueues).
//
// A handed-on or kept place's name goes into next.Place. On a block (or an
// error) what was taken goes back. The rate token is taken last: a job
// that waits for a place spends none; a token comes from this broker's
// batch of the key's tokens.
func (b *Broker) admit(ctx context.Context, typ string, keys []flowKey, cur, next *job.Record, now time.Time) (placement, *flowBlock) {
	pl := placement{holder: next.ClaimID, until: now.Add(natsjs.SlotTTL)}
	conc := concurrencyKeys(keys)
	if len(conc) == 1 {
		pl.limit = conc[0].Limit
	}
	takeover := cur.Worker != "" && cur.PlaceHolder() != ""
	switch {
	case len(conc) == 0:
	case takeover:
		kept := true
		for _, k := range conc {
			err := b.places.do(ctx, k.Key, natsjs.LeaseOp{Kind: natsjs.LeaseHold, Holder: cur.PlaceHolder()}, now)
			if errors.Is(err, natsjs.ErrLapsed) {
				kept = false
				break
			}
			if err != nil {
				b.flowHeldBack(typ, k.Class)
				return pl, &flowBlock{key: k.Key, why: blockedConcurrency, delay: probeEvery + blockErr(err)}
			}
		}
		if kept {
			pl = placement{holder: cur.PlaceHolder(), until: now.Add(natsjs.SlotTTL), kept: true}
			conc = nil
		} else {
			// Some lapsed: places are taken afresh, and what is left of
			// the old claim's goes back once the new one is written
			// (given back before, it might be a place an attempt's
			// verdict handed on meanwhile).
			pl.drop = cur.PlaceHolder()
		}
	default:
		if sp, ok := b.places.spareFor(conc[0].Key, conc[0].Limit, now, b.leaseWindow()); ok {
			pl = placement{holder: sp.holder, until: sp.until, limit: sp.limit}
			conc = nil
		}
	}
	if pl.holder != next.ClaimID {
		next.Place = pl.holder
	}
	var taken []flowKey
	undo := func() {
		if pl.kept {
			return
		}
		if len(conc) == 0 { // a spare: all its keys
			taken = keys
		}
		b.unlease(ctx, taken, pl.holder)
	}
	for _, k := range keys {
		if k.Rate != nil {
			wait, err := b.takeToken(ctx, k, now)
			if err != nil || wait > 0 {
				undo()
				b.flowHeldBack(typ, k.Class)
				return pl, &flowBlock{key: k.Key, why: blockedRate, delay: max(wait, time.Millisecond) + jitter(20*time.Millisecond) + blockErr(err)}
			}
			continue
		}
		if len(conc) == 0 {
			continue // kept or handed on
		}
		err := b.places.do(ctx, k.Key, natsjs.LeaseOp{Kind: natsjs.LeaseTake, Holder: pl.holder, Limit: k.Limit}, now)
		if err != nil {
			undo()
			b.flowHeldBack(typ, k.Class)
			return pl, &flowBlock{key: k.Key, why: blockedConcurrency, delay: probeEvery + blockErr(err)}
		}
		taken = append(taken, k)
	}
	if b.cfg.OnFlowPlace != nil {
		for _, k := range keys {
			if k.Rate == nil {
				b.cfg.OnFlowPlace(typ, k.Class)
			}
		}
	}
	return pl, nil
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

// takeToken takes a token of k's rate bucket at now, from this broker's
// batch of them if one is left, else with a new batch (tokenBatches); with
// none, it says how long until one is there.
func (b *Broker) takeToken(ctx context.Context, k flowKey, now time.Time) (time.Duration, error) {
	unlock := b.flowKeys.lock(k.Key)
	defer unlock()
	ok, want := b.tokens.take(k.Key, k.Rate.PerSecond, now)
	if ok {
		return 0, nil
	}
	took, wait, err := b.stores.Slots.TakeTokens(ctx, k.Key, k.Rate.PerSecond, k.Rate.BurstOr(), want, now)
	if took > 0 {
		b.tokens.took(k.Key, took, now)
	}
	return wait, err
}

// unlease gives back holder's places under keys, with the next write on
// each key or within releaseDelay (best effort: a place not given back
// runs out SlotTTL after its last renewal).
func (b *Broker) unlease(ctx context.Context, keys []flowKey, holder string) {
	if holder == "" {
		return
	}
	for _, k := range keys {
		if k.Rate != nil {
			continue
		}
		b.places.give(ctx, k.Key, holder)
	}
}

// release gives back the places of rec's current claim under d, when d
// has concurrency keys: its attempt ended, or a broker found it ended. A
// record whose verdict was written holds no claim (job.Record.EndClaim):
// its places were given back, or handed on, by the broker that wrote it.
func (b *Broker) release(ctx context.Context, d *job.TypeDecl, rec *job.Record) {
	if d == nil || rec == nil || len(d.Concurrency) == 0 || rec.PlaceHolder() == "" {
		return
	}
	keys := flowKeys(d, rec)
	b.unlease(ctx, keys, rec.PlaceHolder())
	b.unpark(d, keys)
}

// releaseEnded gives back the places of held, the claim whose verdict this
// broker just wrote (ending its claim: no one else gives them back). A
// place under a single key that this broker took (so knows its limit and
// until when it is held) is kept as a spare for the next start under the
// key, which takes it with no write; one not taken within releaseDelay is
// given back.
func (b *Broker) releaseEnded(ctx context.Context, d *job.TypeDecl, held *job.Record) {
	if d == nil || held == nil || len(d.Concurrency) == 0 || held.PlaceHolder() == "" {
		return
	}
	keys := flowKeys(d, held)
	holder := held.PlaceHolder()
	conc := concurrencyKeys(keys)
	if r, ok := b.renewals.get(holder); ok && len(conc) == 1 && r.limit > 0 && r.limit == conc[0].Limit {
		b.places.spare(ctx, conc[0].Key, spare{holder: holder, until: r.until, limit: r.limit})
	} else {
		b.unlease(ctx, keys, holder)
	}
	b.unpark(d, keys)
}

// concurrencyKeys are those of keys that are concurrency keys (places).
func concurrencyKeys(keys []flowKey) []flowKey {
	var conc []flowKey
	for _, k := range keys {
		if k.Rate == nil {
			conc = append(conc, k)
		}
	}
	return conc
}

// unpark has the parked starts under keys look again: a place is free.
func (b *Broker) unpark(d *job.TypeDecl, keys []flowKey) {
	if s := b.schedOf(d.Name); s != nil {
		for _, k := range keys {
			if k.Rate == nil {
				s.unpark(k.Key)
			}
		}
	}
}

// hold keeps the places of a running claim, on its beats, and says until
// when they are held for sure (the zero time: the type has no concurrency
// keys, nothing lapses). A place is renewed only while it is live
// (natsjs.SlotStore.Hold): one that ran out meanwhile (its beats did not
// reach a broker that could write the store for SlotTTL) may have let
// another attempt start, so it is natsjs.ErrLapsed, and the attempt is
// handed back rather than run on over the limit. Within leaseWindow of
// what this broker last renewed it touches nothing.
func (b *Broker) hold(ctx context.Context, d *job.TypeDecl, rec *job.Record, now time.Time) (time.Time, error) {
	holder := rec.PlaceHolder()
	if len(d.Concurrency) == 0 || holder == "" {
		return time.Time{}, nil
	}
	if r, _ := b.renewals.get(holder); r.until.Sub(now) >= b.leaseWindow() {
		return r.until, nil
	}
	for _, k := range flowKeys(d, rec) {
		if k.Rate != nil {
			continue
		}
		err := b.places.do(ctx, k.Key, natsjs.LeaseOp{Kind: natsjs.LeaseHold, Holder: holder}, now)
		if errors.Is(err, natsjs.ErrLapsed) {
			b.renewals.forget(holder)
			b.log.Warn("a running attempt's concurrency place lapsed: the job is handed back", "job_id", rec.ID, "type", rec.Type, "class", k.Class)
			return time.Time{}, err
		}
		if err != nil {
			return time.Time{}, err
		}
	}
	// Each place renewed holds until now+SlotTTL (natsjs.LeaseHold).
	until := now.Add(natsjs.SlotTTL)
	b.renewals.renew(holder, until, now)
	return until, nil
}

// leaseWindow is how long a beat answered ok keeps its attempt for sure:
// the claim is not taken over for StaleAfter, and its places are renewed
// whenever less than this is left of them (SlotTTL is longer).
func (b *Broker) leaseWindow() time.Duration {
	return min(b.cfg.StaleAfter, natsjs.SlotTTL*3/4)
}

// leaseLeft is what a beat answered at now tells its worker: how long its
// attempt is its own for sure, its claim signed at sign and its places
// held until placesUntil (zero: none). A worker stops its handler once
// that much has passed since it sent the beat (pkg/worker). Another
// dispatcher judges the claim stale, or the place run out, by its own
// clock: a tenth of StaleAfter (at most a second) is kept for clocks that
// disagree. At least a millisecond: 0 would say no lease at all.
func (b *Broker) leaseLeft(sign, placesUntil, now time.Time) time.Duration {
	end := sign.Add(b.cfg.StaleAfter)
	if !placesUntil.IsZero() && placesUntil.Before(end) {
		end = placesUntil
	}
	skew := min(b.cfg.StaleAfter/10, time.Second)
	return max(end.Sub(now)-skew, time.Millisecond)
}

// maxRenewals bounds the claims whose places a broker remembers; past it
// the run-out ones are dropped (one forgotten is renewed again).
const maxRenewals = 100000

// renewals is, for each place name (job.Record.PlaceHolder), until when
// this broker last renewed (or took) its places, and the limit of its one
// key it took it under (0: several keys, or renewed only: never a spare).
type renewals struct {
	mu   sync.Mutex
	last map[string]renewal
}

type renewal struct {
	until time.Time
	limit int
}

func (r *renewals) get(holder string) (renewal, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.last[holder]
	return v, ok
}

// note remembers that holder's places are held until, taken under limit.
func (r *renewals) note(holder string, until time.Time, limit int, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setLocked(holder, renewal{until: until, limit: limit}, now)
}

// renew remembers that holder's places are held until, keeping the limit
// they were taken under.
func (r *renewals) renew(holder string, until, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.last[holder]
	v.until = until
	r.setLocked(holder, v, now)
}

func (r *renewals) setLocked(holder string, v renewal, now time.Time) {
	if r.last == nil {
		r.last = map[string]renewal{}
	}
	if _, ok := r.last[holder]; !ok && len(r.last) >= maxRenewals {
		for c, at := range r.last {
			if !at.until.After(now) {
				delete(r.last, c)
			}
		}
		if len(r.last) >= maxRenewals {
			clear(r.last)
		}
	}
	r.last[holder] = v
}

func (r *renewals) forget(holder string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, holder)
}

// keyLocks serializes this broker's takes of each rate bucket's tokens: a
// bucket is one value every start under it writes, and the broker's
// requests racing on it would lose their compare-and-sets to each other,
// run out of tries (natsjs.ErrLeaseBusy) and park their jobs as if the
// store were out; one at a time, a batch taken serves the requests that
// waited for it, and only other dispatchers race it (a concurrency key's
// writes are grouped in placeQueues). The keys share keyStripes locks by
// hash.
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

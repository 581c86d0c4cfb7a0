package broker

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
)

// What a type's limits cost in writes to JOBGATE_SLOTS. Each start under
// a concurrency key takes a place, each verdict gives it back, each start
// under a rate limit takes a token: done one by one, three compare-and-set
// writes a job, each the cost of a record write. A broker saves most of
// them:
//
//   - A key's places are written by one compare-and-set at a time in this
//     broker (placeQueues): the operations asked meanwhile (other starts'
//     places, beats' renewals) wait and go together in the next write, a
//     group commit per key.
//   - A place given back is not written at once: it waits, in this
//     broker's memory, for the next write on its key (a start, a renewal),
//     which carries it, or for releaseDelay, or for the broker's Stop. A
//     place is thus held a little longer than its attempt, never given
//     twice, and another holder's renewal is judged on its own place only.
//   - A place given back at its attempt's verdict, under a single key, by
//     the broker that took it is a spare: the broker's next start under
//     the same key and limit takes it over with no write at all (its name
//     goes into the new claim's record, job.Record.Place), while it is
//     held for longer than leaseWindow. Only the verdict's broker may: the
//     verdict ends the claim in the record, so no one else gives the place
//     back, and the attempt is over. A spare not taken within releaseDelay
//     is given back like any place; within spareHold while the key, as
//     this broker last wrote it, holds at most half its limit (a roomy
//     key: a place held a little longer refuses no one, and at a steady
//     rate the next start under the key mostly comes within it). A chain
//     of starts so runs on one place for SlotTTL-leaseWindow after its
//     last write; the next start then takes a place afresh, in one write
//     with the old one's give-back.
//   - A rate bucket's tokens are taken a few at a time (tokenBatches):
//     about tokenHorizon's worth of this broker's recent starts under the
//     key, in one write, handed out here; a token not used within
//     tokenHorizon of its taking is dropped. The starts across dispatchers
//     then hold to at most burst + rate·(window + tokenHorizon) in any
//     window.

// releaseDelay bounds how long a place given back waits for the next write
// on its key before it is written by itself.
const releaseDelay = 25 * time.Millisecond

// spareHold bounds how long a spare waits for the next start under a
// roomy key (at most half its limit held) before it is given back: at a
// few starts a second under a key, a job would otherwise cost a write to
// take a place and another to give it back.
const spareHold = 250 * time.Millisecond

// tokenHorizon is how long a token taken in a batch may wait for its
// start; a batch is about this long's worth of the broker's recent starts
// under the key.
const tokenHorizon = 50 * time.Millisecond

// placeQueues is, per concurrency key, the operations on its places this
// broker waits to write.
type placeQueues struct {
	mu      sync.Mutex
	keys    map[string]*placeQueue
	stopped bool // the broker stopped: a place given back is written at once
	b       *Broker
	delay   time.Duration // releaseDelay (tests lengthen it)
}

// placeQueue is one key's: the operations waiting for a write (each with
// its caller waiting), the places given back not yet written, and whether
// a write is under way (its leader's).
type placeQueue struct {
	ops   []*placeOp
	gives []string // holders whose places are given back, not yet written
	// spares are places given back at a verdict that a start may take
	// over; written as given back like gives.
	spares []spare
	busy   bool
	timer  *time.Timer // writes gives within releaseDelay
	// long: timer is set for spareHold (only roomy spares wait); a place
	// given back meanwhile sets it for releaseDelay.
	long bool
}

// spare is a place given back at its attempt's verdict that this broker
// may hand on: held until at least until, taken under the key's limit.
type spare struct {
	holder string
	until  time.Time
	limit  int
}

// placeOp is an operation a caller waits on: its outcome, or its turn to
// write the key's queue (lead).
type placeOp struct {
	op   natsjs.LeaseOp
	now  time.Time
	done chan struct{} // a signal: the outcome is set, or lead
	lead bool
	err  error // the store's
}

func (p *placeQueues) queue(key string) *placeQueue {
	if p.keys == nil {
		p.keys = map[string]*placeQueue{}
	}
	q := p.keys[key]
	if q == nil {
		q = &placeQueue{}
		p.keys[key] = q
	}
	return q
}

// forgetLocked drops key's queue when nothing is left of it.
func (p *placeQueues) forgetLocked(key string, q *placeQueue) {
	if !q.busy && len(q.ops) == 0 && len(q.gives) == 0 && len(q.spares) == 0 && q.timer == nil && p.keys[key] == q {
		delete(p.keys, key)
	}
}

// do applies op to key's places at now, with whatever else this broker
// has for the key by then, and returns its outcome (op.Err) or the
// store's error.
func (p *placeQueues) do(ctx context.Context, key string, op natsjs.LeaseOp, now time.Time) error {
	w := &placeOp{op: op, now: now, done: make(chan struct{}, 1)}
	p.mu.Lock()
	q := p.queue(key)
	q.ops = append(q.ops, w)
	if q.busy {
		p.mu.Unlock()
		select {
		case <-w.done:
		case <-ctx.Done():
			p.mu.Lock()
			if i := indexOf(q.ops, w); i >= 0 {
				// Not written yet: it never will be.
				q.ops = append(q.ops[:i], q.ops[i+1:]...)
				if w.lead {
					p.handOffLocked(key, q)
				}
				p.mu.Unlock()
				return ctx.Err()
			}
			p.mu.Unlock()
			<-w.done // in a write under way
		}
		p.mu.Lock()
		lead := w.lead
		p.mu.Unlock()
		if !lead {
			return w.outcome()
		}
	} else {
		q.busy = true
		p.mu.Unlock()
	}
	p.write(ctx, key, q)
	return w.outcome()
}

func (w *placeOp) outcome() error {
	if w.err != nil {
		return w.err
	}
	return w.op.Err
}

func indexOf(ops []*placeOp, w *placeOp) int {
	for i, o := range ops {
		if o == w {
			return i
		}
	}
	return -1
}

// write is the leader's: it writes what key's queue holds (its own
// operation among it), in one compare-and-set, tells each waiter its
// outcome, and hands the queue to the next waiter, if any.
func (p *placeQueues) write(ctx context.Context, key string, q *placeQueue) {
	p.mu.Lock()
	batch, gives := q.ops, q.gives
	for _, sp := range q.spares {
		gives = append(gives, sp.holder)
	}
	q.ops, q.gives, q.spares = nil, nil, nil
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	p.mu.Unlock()
	ops := make([]natsjs.LeaseOp, 0, len(gives)+len(batch))
	var now time.Time
	for _, h := range gives {
		ops = append(ops, natsjs.LeaseOp{Kind: natsjs.LeaseGive, Holder: h})
	}
	for _, w := range batch {
		if w.op.Kind != 0 {
			ops = append(ops, w.op)
		}
		if w.now.After(now) {
			now = w.now
		}
	}
	var err error
	if len(ops) > 0 {
		if now.IsZero() {
			now = p.b.cfg.Now()
		}
		err = p.b.stores.Slots.Apply(ctx, key, now, ops)
		if err != nil && len(gives) > 0 {
			p.b.log.Debug("concurrency places not given back, they run out", "key", key, "places", len(gives), "err", err)
		}
	}
	i := len(gives)
	for _, w := range batch {
		w.err = err
		if w.op.Kind != 0 {
			w.op = ops[i]
			i++
		}
	}
	p.mu.Lock()
	for _, w := range batch {
		w.done <- struct{}{}
	}
	p.handOffLocked(key, q)
	p.mu.Unlock()
}

// handOffLocked passes key's queue to its first waiter, or leaves it idle,
// its places given back written within releaseDelay.
func (p *placeQueues) handOffLocked(key string, q *placeQueue) {
	if len(q.ops) > 0 {
		w := q.ops[0]
		w.lead = true
		w.done <- struct{}{}
		return
	}
	q.busy = false
	p.armLocked(key, q)
	p.forgetLocked(key, q)
}

// armLocked sets the timer that writes key's places given back, if some
// wait and no write will carry them.
func (p *placeQueues) armLocked(key string, q *placeQueue) {
	if len(q.gives)+len(q.spares) == 0 || q.busy {
		return
	}
	delay, long := p.delay, false
	if delay == 0 {
		delay = releaseDelay
		if len(q.gives) == 0 && p.roomyLocked(key, q) {
			delay, long = spareHold, true
		}
	}
	if q.timer != nil {
		if !q.long || long {
			return
		}
		q.timer.Stop() // a place given back waits releaseDelay at most
	}
	var t *time.Timer
	t = time.AfterFunc(delay, func() {
		p.mu.Lock()
		if q.timer == t {
			q.timer = nil
		}
		p.mu.Unlock()
		p.flush(key)
	})
	q.timer, q.long = t, long
}

// roomyLocked says whether key, as this broker last wrote or read it,
// holds at most half the limit its spares were taken under.
func (p *placeQueues) roomyLocked(key string, q *placeQueue) bool {
	if len(q.spares) == 0 || q.spares[0].limit <= 0 {
		return false
	}
	n, known := p.b.stores.Slots.LastLeased(key, p.b.cfg.Now())
	return known && 2*n <= q.spares[0].limit
}

// give gives back holder's place under key: with the next write on the
// key, at the latest within releaseDelay (at once once the broker
// stopped).
func (p *placeQueues) give(ctx context.Context, key, holder string) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		if err := p.do(ctx, key, natsjs.LeaseOp{Kind: natsjs.LeaseGive, Holder: holder}, p.b.cfg.Now()); err != nil && !errors.Is(err, natsjs.ErrLapsed) {
			p.b.log.Debug("concurrency place not given back, it runs out", "key", key, "err", err)
		}
		return
	}
	q := p.queue(key)
	q.gives = append(q.gives, holder)
	p.armLocked(key, q)
	p.mu.Unlock()
}

// spare gives back sp's place under key, a spare a start under the key
// may take over (spareFor) until the next write on the key, at the latest
// within releaseDelay (given back at once once the broker stopped).
func (p *placeQueues) spare(ctx context.Context, key string, sp spare) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		p.give(ctx, key, sp.holder)
		return
	}
	q := p.queue(key)
	q.spares = append(q.spares, sp)
	p.armLocked(key, q)
	p.mu.Unlock()
}

// spareFor takes over a spare under key taken under limit and held for at
// least window after now, the one held longest; those held for less are
// left to be given back.
func (p *placeQueues) spareFor(key string, limit int, now time.Time, window time.Duration) (spare, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.keys[key]
	if q == nil || p.stopped {
		return spare{}, false
	}
	best := -1
	for i, sp := range q.spares {
		if sp.limit == limit && sp.until.Sub(now) >= window && (best < 0 || sp.until.After(q.spares[best].until)) {
			best = i
		}
	}
	if best < 0 {
		return spare{}, false
	}
	sp := q.spares[best]
	q.spares = append(q.spares[:best], q.spares[best+1:]...)
	if len(q.gives)+len(q.spares) == 0 && q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	p.forgetLocked(key, q)
	return sp, true
}

// flush writes the places given back under key that wait.
func (p *placeQueues) flush(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_ = p.do(ctx, key, natsjs.LeaseOp{}, time.Time{}) // no operation of its own
}

// stop writes every place given back that waits, and has those given back
// from now on written at once: the broker stops.
func (p *placeQueues) stop() {
	p.mu.Lock()
	p.stopped = true
	var keys []string
	for key, q := range p.keys {
		if len(q.gives)+len(q.spares) > 0 {
			keys = append(keys, key)
		}
	}
	p.mu.Unlock()
	for _, key := range keys {
		p.flush(key)
	}
}

// waitingGives counts the places given back not yet written (tests).
func (p *placeQueues) waitingGives() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, q := range p.keys {
		n += len(q.gives) + len(q.spares)
	}
	return n
}

// tokenBatches is, per rate key, the tokens this broker took and has not
// handed out yet, and its recent rate of starts under the key.
type tokenBatches struct {
	mu   sync.Mutex
	keys map[string]*tokenBatch
}

type tokenBatch struct {
	left int       // tokens taken, not handed out
	from time.Time // when they were taken: they lapse tokenHorizon after
	rate float64   // starts a second under the key, decayed over a second
	at   time.Time // of rate
}

// maxTokenKeys bounds the rate keys a broker keeps batches of; past it
// the lapsed ones are dropped (a key dropped starts over with batches
// of one).
const maxTokenKeys = 10000

// take hands out one of key's tokens taken in a batch, if one is left and
// not lapsed at now, and counts the start in the key's rate either way;
// else it says how many to take in the next batch. The caller holds the
// key's lock (keyLocks), so a batch is taken once.
func (t *tokenBatches) take(key string, perSecond float64, now time.Time) (bool, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.keys == nil {
		t.keys = map[string]*tokenBatch{}
	}
	tb := t.keys[key]
	if tb == nil {
		if len(t.keys) >= maxTokenKeys {
			for k, o := range t.keys {
				if !o.from.Add(tokenHorizon).After(now) {
					delete(t.keys, k)
				}
			}
			if len(t.keys) >= maxTokenKeys {
				clear(t.keys)
			}
		}
		tb = &tokenBatch{at: now}
		t.keys[key] = tb
	}
	if dt := now.Sub(tb.at).Seconds(); dt > 0 {
		tb.rate *= math.Exp(-dt)
		tb.at = now
	}
	tb.rate++ // one start, over a decay of a second
	// A token of the batch goes to a start of its horizon only: one whose
	// time (the claim's, taken before it waited for the key's lock) is
	// before the batch was taken takes one token from the bucket, which
	// refills nothing for a time behind its own, and leaves the batch be.
	if tb.left > 0 && now.Before(tb.from) {
		return false, 1
	}
	if tb.left > 0 && now.Before(tb.from.Add(tokenHorizon)) {
		tb.left--
		return true, 0
	}
	tb.left = 0 // none left, or lapsed: dropped
	want := int(math.Ceil(tb.rate * tokenHorizon.Seconds()))
	// Never more than tokenHorizon's worth of the whole rate: one broker
	// does not hold the others' share.
	want = min(want, int(perSecond*tokenHorizon.Seconds()))
	return false, max(want, 1)
}

// took notes a batch of n tokens taken at now, one of them handed out at
// once.
func (t *tokenBatches) took(key string, n int, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tb := t.keys[key]; tb != nil && n > 1 {
		tb.left, tb.from = n-1, now
	}
}

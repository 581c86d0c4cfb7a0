package broker

import (
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
)

// Parking: the work messages whose job waits for a concurrency place or a
// rate token (flow.go) wait here per key, so that a key with thousands of
// jobs waiting costs one look a probeEvery, not one a job: of a key's
// parked messages one is the probe, looked at again after probeEvery (or
// when its rate token is due); the others wait for parkBackstop, unless a
// probe that passes, or a place this broker gives back, wakes the next
// one at once. Which one wakes: the best priority, then the oldest. The
// backstop covers what this broker does not see (a place given back on
// another broker wakes the probe's next look here, not a parked message).

const probeEvery = time.Second

// parkBackstop: a parked message is looked at again after this long even
// unwoken (a variable for the tests).
var parkBackstop = 30 * time.Second

const (
	// maxParkedKeys bounds the keys parked per type in memory; past it a
	// message is deferred as if it were its key's probe.
	maxParkedKeys = 100000
)

// parkQ is one key's parked messages, its probe among them.
type parkQ struct {
	probeAt time.Time         // when its probe is looked at again (zero: none)
	msgs    map[uint64]parked // by sequence
}

type parked struct {
	tenant, requester string
	seq               uint64
	priority          int
}

// park defers msg, whose job waits on key, until it is its key's probe's
// turn (delay from now) or woken.
func (s *sched) park(msg *natsjs.LaneMsg, priority int, key string, delay time.Duration, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.parked[key]
	if q == nil {
		if len(s.parked) >= maxParkedKeys {
			s.deferLocked(s.laneLocked(msg.Tenant, msg.Requester), msg.Seq, now.Add(delay), priority)
			return
		}
		q = &parkQ{msgs: map[uint64]parked{}}
		s.parked[key] = q
	}
	q.msgs[msg.Seq] = parked{tenant: msg.Tenant, requester: msg.Requester, seq: msg.Seq, priority: priority}
	s.parkedBy[msg.Seq] = key
	if q.probeAt.IsZero() || !q.probeAt.After(now) {
		q.probeAt = now.Add(delay)
		s.deferLocked(s.laneLocked(msg.Tenant, msg.Requester), msg.Seq, q.probeAt, priority)
		return
	}
	s.laneLocked(msg.Tenant, msg.Requester).deferTo(msg.Seq, now.Add(parkBackstop), priority)
}

// stillParked re-parks a deferred message come due at seq, without a
// read, while its key's probe is live: only the probe's look can tell the
// key freed, so the others' looks would be reads and a compare-and-set
// each for nothing. It reports whether it did.
func (s *sched) stillParked(l *laneQ, seq uint64, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	key, ok := s.parkedBy[seq]
	if !ok {
		return false
	}
	q := s.parked[key]
	if q == nil || !q.probeAt.After(now) {
		return false
	}
	l.deferTo(seq, now.Add(parkBackstop), q.msgs[seq].priority)
	return true
}

// unparkSeq takes a message out of its key's parked ones, returning the
// key ("" when it was not parked): it is being looked at (and parked
// again if it still waits).
func (s *sched) unparkSeq(seq uint64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	key, ok := s.parkedBy[seq]
	if !ok {
		return ""
	}
	delete(s.parkedBy, seq)
	if q := s.parked[key]; q != nil {
		delete(q.msgs, seq)
	}
	return key
}

// parkedOn is the key a message is parked on, "" when it is not.
func (s *sched) parkedOn(seq uint64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parkedBy[seq]
}

// unpark wakes key's best parked message: a place under it may be free.
func (s *sched) unpark(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.parked[key]
	if q == nil {
		return
	}
	q.probeAt = time.Time{}
	now := s.b.cfg.Now()
	for len(q.msgs) > 0 {
		var best parked
		for _, p := range q.msgs {
			if best.seq == 0 || p.priority < best.priority || p.priority == best.priority && p.seq < best.seq {
				best = p
			}
		}
		delete(q.msgs, best.seq)
		delete(s.parkedBy, best.seq)
		// A message no longer deferred was settled meanwhile: the next
		// one wakes.
		if l := s.tenants[best.tenant]; l != nil {
			if lane := l.lanes[best.requester]; lane != nil {
				if _, ok := lane.deferred[best.seq]; ok {
					// It looks now; blocked again, it is the next probe.
					lane.deferTo(best.seq, now, best.priority)
					s.wakeOneLocked()
					return
				}
			}
		}
	}
	delete(s.parked, key)
}

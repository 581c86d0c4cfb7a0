package broker

import (
	"container/list"
	"context"
	"math/bits"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/job"

	"github.com/jobgate/jobgate/internal/natsjs"
)

// A type's scheduler hands out its work fairly, on jobgate's side, with no
// JetStream consumer: it keeps in memory the lanes (one a requester of a
// tenant) that have work, learnt from a listing of the work stream and the
// notices of new work, and reads a lane's oldest message by a direct get.
// A free slot takes the tenant whose turn it is by smooth weighted
// round-robin (a tenant of weight 3 gets three picks for one of weight 1;
// a tenant whose work comes back after none joins level with the richest
// and wins the tie), then of that tenant the requester whose best waiting
// job has the best priority (1 first), the least recently picked of those
// tied, and of that requester's jobs the best priority, the oldest first.
// A lane's best priority is known without a read: its notices and listings
// say which priorities it may have work of, a batch read which it read to
// the end, its read-ahead holds messages by priority, and a deferred
// message keeps its job's. A job's work message stays in the stream until
// the job is terminal: the broker that read it checks on it again when its
// claim could have gone stale or its retry is due (deferred), takes it
// over or starts it then, and removes it once the job has ended. Any
// number of brokers may schedule one type: each keeps its own lanes, and
// the claim's compare-and-set on the record decides which runs a job.
//
// Waiting requests are woken as work comes, not all at once: news of one
// message (a notice, a slot of a capped tenant freed, a parked message
// woken) wakes the regular request that has waited longest, and one that
// took work wakes the next, so a burst is taken by as many requests as it
// has messages while an idle type's hundred waiting slots cost one wakeup
// a job, not a hundred. One timer, set for the earliest deferred message or
// recheck, wakes one request when it falls due. A listing and a change of
// the declaration wake every request; a newcomer request (which may not
// take every tenant) is woken by every news, as they are few.

// Scheduling limits.
const (
	// listEvery: a listing of the stream (one subject a queued job) runs
	// at most this often while notices keep the lanes current, and at most
	// a quarter of the time (listShare) however long it takes.
	listEvery = 30 * time.Second
	listShare = 4
	// noticeGrace: a lane noticed this recently whose read found nothing is
	// read again shortly (recheckSoon): the notice is a plain delivery of
	// the published message, which may come before the stream stored it.
	// Past it, until noticeLimit, it is read again less and less often
	// (half the time since the notice, at most recheckMax): on a loaded
	// disk a store can lag its notice by seconds, and a lane left alone
	// would wait for the next listing (listEvery).
	noticeGrace = time.Second
	recheckSoon = 50 * time.Millisecond
	noticeLimit = 10 * time.Second
	recheckMax  = 2 * time.Second
	// idleWake bounds how long a waiting request sleeps without news.
	idleWake = time.Second
	// readAhead: a read of a lane's cursor takes up to this many of its
	// messages at once, so that requests on one busy lane do not each wait
	// a round trip for their turn; the read-ahead of all a type's lanes
	// holds at most aheadMax messages and aheadBytes of their data.
	readAhead  = 16
	aheadMax   = 1024
	aheadBytes = 4 << 20
)

type sched struct {
	b     *Broker
	typ   string
	lanes *natsjs.WorkLanes
	stop  func()

	listMu sync.Mutex // one listing at a time

	mu      sync.Mutex
	tenants map[string]*tenantQ
	picks   uint64
	// wake is closed and replaced for news every waiting request looks at
	// (a listing, a change of the declaration); news closes and replaces
	// news, which the newcomer requests wait on, while they are any.
	wake, news chan struct{}
	newcomers  int
	// waiters are the regular requests waiting, longest first: news of
	// work wakes the first (wakeOneLocked). gen counts the news, so that
	// a request that found nothing to pick looks again, rather than wait,
	// when some came in between.
	waiters *list.List // of *waiter
	gen     uint64
	// timer wakes a waiter at timerAt, the earliest due time of a deferred
	// message or recheck a waiting request saw (zero: not set).
	timer    *time.Timer
	timerAt  time.Time
	listedAt time.Time
	listTook time.Duration
	lastSeq  uint64
	held     map[string]*holding // by job key, the claims this broker made
	// ahead counts the messages read ahead in all lanes, and their bytes.
	ahead, aheadSize int
	// parked holds the messages waiting for a flow key (park.go).
	parked   map[string]*parkQ
	parkedBy map[uint64]string // a parked message's key, by sequence
}

// holding is a claim this broker made: it counts against its tenant's cap
// until the job needs no slot, names the work message it came from, and,
// while the claim stands, keeps the record as this broker last wrote it and
// the sequence of the job's newest event as it knows it, so that the
// worker's verdict needs neither read again.
type holding struct {
	tenant, requester string
	seq               uint64
	priority          int
	rec               *job.Record
	event             uint64
}

type tenantQ struct {
	name     string
	weight   int
	current  int
	fresh    bool
	lastPick uint64
	held     int
	lanes    map[string]*laneQ
}

type laneQ struct {
	// What a pick looks at comes first (a 64-byte cache line, then the
	// requester, which breaks ties).
	//
	// Per priority (1 to 5, see natsjs.WorkSubjectOf): works, whether it
	// may have messages at or after its cursor (a read takes the best
	// priority with work first; work says whether any has); dry, that a
	// batch read of it met its last message and no notice or listing of it
	// came since (the lane ranks by what it read ahead of it, readyRank,
	// while a read still looks past its cursor); aheadIn, that ahead holds
	// messages of it.
	works, dry, aheadIn prioSet
	work                bool
	// ranked is the rank of the lane's latest pick (readyRank): a read
	// that finds that priority's work gone, and the lane's next worse,
	// returns nothing, and the tenant's requesters are ranked again.
	ranked    int
	lastPick  uint64
	dues      dueQ      // deferred, by due time
	recheck   time.Time // when a lane that looked empty is read again
	requester string
	// deferred: sequence → when to look at it again.
	deferred map[uint64]deferral
	// cursor: per priority, the next sequence to read from. heard counts
	// a priority's notices and listings, so that a read can tell whether
	// one came while it read.
	cursor  [6]uint64
	heard   [6]uint32
	noticed time.Time
	// noticedAt: the priorities noticed since the lane was last found
	// empty past noticeLimit.
	noticedAt prioSet
	// taken holds the messages read from the cursor and not settled yet:
	// a concurrent read that meets one reads past it, so requests racing
	// on one lane take different jobs instead of racing for one claim.
	taken map[uint64]bool
	// ahead holds messages read from a priority's cursor before a request
	// asked for them, oldest first (all below that cursor).
	ahead [6][]*natsjs.LaneMsg
	// turn lets one request at a time read from the cursor: requests that
	// read it together would all get the same message and read again,
	// each, for every one of them that wins it.
	turn chan struct{}
}

func newSched(b *Broker, typ string) *sched {
	return &sched{b: b, typ: typ, lanes: b.stores.Work.Lanes(typ), tenants: map[string]*tenantQ{},
		wake: make(chan struct{}), news: make(chan struct{}), waiters: list.New(), held: map[string]*holding{},
		parked: map[string]*parkQ{}, parkedBy: map[uint64]string{}}
}

// start removes the consumers of earlier versions, subscribes to notices
// and lists the lanes with work.
func (s *sched) start(ctx context.Context) error {
	if n, err := s.lanes.RemoveConsumers(ctx); err != nil {
		s.b.log.Warn("work consumers of earlier versions not removed", "type", s.typ, "err", err)
	} else if n > 0 {
		s.b.log.Info("work consumers of earlier versions removed", "type", s.typ, "consumers", n)
	}
	stop, err := s.lanes.Notices(s.notice)
	if err != nil {
		return err
	}
	s.stop = stop
	if err := s.list(ctx, true); err != nil {
		stop()
		return err
	}
	return nil
}

func (s *sched) close() {
	if s.stop != nil {
		s.stop()
	}
	s.mu.Lock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
}

func (s *sched) notice(tenant, requester string, priority int) {
	s.mu.Lock()
	l := s.laneLocked(tenant, requester)
	l.works, l.work, l.noticed = l.works.with(priority), true, s.b.cfg.Now()
	l.noticedAt = l.noticedAt.with(priority)
	l.dry = l.dry.without(priority)
	l.heard[priority]++
	s.wakeOneLocked()
	s.mu.Unlock()
}

// wakeLocked has every waiting request look.
func (s *sched) wakeLocked() {
	s.gen++
	close(s.wake)
	s.wake = make(chan struct{})
	s.newsLocked()
	for s.waiters.Len() > 0 {
		s.waiters.Remove(s.waiters.Front()).(*waiter).woken <- struct{}{}
	}
}

// wakeOneLocked has one waiting request look (news of one message, or
// of one slot): the regular one that has waited longest, and the
// newcomers.
func (s *sched) wakeOneLocked() {
	s.gen++
	s.newsLocked()
	if s.waiters.Len() > 0 {
		s.waiters.Remove(s.waiters.Front()).(*waiter).woken <- struct{}{}
	}
}

func (s *sched) newsLocked() {
	if s.newcomers > 0 {
		close(s.news)
		s.news = make(chan struct{})
	}
}

func (s *sched) tenantLocked(name string) *tenantQ {
	t := s.tenants[name]
	if t == nil {
		t = &tenantQ{name: name, weight: s.b.cfg.weight(name), fresh: true, lanes: map[string]*laneQ{}}
		s.tenants[name] = t
	}
	return t
}

func (s *sched) laneLocked(tenant, requester string) *laneQ {
	t := s.tenantLocked(tenant)
	l := t.lanes[requester]
	if l == nil {
		l = &laneQ{requester: requester, deferred: map[uint64]deferral{}, taken: map[uint64]bool{}, turn: make(chan struct{}, 1)}
		t.lanes[requester] = l
	}
	return l
}

// list reads which lanes have work, when due (force: now). A lane found
// with work is read from its start again: what this broker skipped there
// is deferred, and a message it never saw may sit behind its cursor only
// when a listing of another broker raced it, which the read settles.
func (s *sched) list(ctx context.Context, force bool) error {
	if !s.listMu.TryLock() {
		return nil
	}
	defer s.listMu.Unlock()
	now := s.b.cfg.Now()
	s.mu.Lock()
	due := force || now.Sub(s.listedAt) >= max(listEvery, listShare*s.listTook)
	last := s.lastSeq
	s.mu.Unlock()
	if !due {
		return nil
	}
	if !force {
		seq, err := s.lanes.LastSeq(ctx)
		if err != nil {
			return err
		}
		if seq == last {
			s.mu.Lock()
			s.listedAt = now
			s.mu.Unlock()
			return nil
		}
	}
	with, seq, err := s.lanes.ListPriorities(ctx)
	took := s.b.cfg.Now().Sub(now)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listedAt, s.listTook, s.lastSeq = now, took, seq
	for tenant, requesters := range with {
		for requester, prios := range requesters {
			l := s.laneLocked(tenant, requester)
			for p := 1; p <= 5; p++ {
				if prios.Has(p) && !l.works.has(p) {
					l.works, l.cursor[p], l.work = l.works.with(p), 0, true
					l.dry = l.dry.without(p)
					l.heard[p]++
				}
			}
		}
	}
	s.wakeLocked()
	return nil
}

// pick chooses the lane whose turn it is among those with work or a
// deferred message due (of the tenants allow accepts, when set), or nil.
// With a deferred message due it returns its sequence.
func (s *sched) pick(now time.Time, allow func(string) bool) (*tenantQ, *laneQ, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ready := func(t *tenantQ) bool {
		if allow != nil && !allow(t.name) {
			return false
		}
		if limit := s.b.cfg.capOf(t.name); limit > 0 && t.held >= limit {
			return false
		}
		for _, l := range t.lanes {
			if laneReady(l, now) {
				return true
			}
		}
		return false
	}
	var best *tenantQ
	if allow != nil {
		// A newcomer slot: the least recently picked tenant it may serve;
		// the round-robin stays as it is.
		for _, t := range s.tenants {
			if ready(t) && (best == nil || t.lastPick < best.lastPick || (t.lastPick == best.lastPick && t.name < best.name)) {
				best = t
			}
		}
	} else {
		top, any := 0, false
		for _, t := range s.tenants {
			if !t.fresh && ready(t) && (!any || t.current > top) {
				top, any = t.current, true
			}
		}
		total := 0
		for _, t := range s.tenants {
			if !ready(t) {
				continue
			}
			if t.fresh {
				t.current, t.fresh = top, false
			}
			t.current += t.weight
			total += t.weight
			if best == nil || t.current > best.current ||
				(t.current == best.current && (t.lastPick < best.lastPick || (t.lastPick == best.lastPick && t.name < best.name))) {
				best = t
			}
		}
		if best != nil {
			best.current -= total
		}
	}
	if best == nil {
		s.forgetIdleLocked(now)
		return nil, nil, 0
	}
	s.picks++
	best.lastPick = s.picks
	// The slot counts against the tenant's cap from the pick on, so that
	// concurrent requests cannot all take the tenant's last free slot;
	// hold keeps it, unreserve gives it back.
	best.held++
	// Of the tenant's requesters, the one whose best waiting job has the
	// best priority; of those tied, the least recently picked.
	var lane *laneQ
	rank := 0
	for _, l := range best.lanes {
		r, ready := l.readyRank(now)
		if !ready {
			continue
		}
		if lane == nil || r < rank || r == rank && (l.lastPick < lane.lastPick || (l.lastPick == lane.lastPick && l.requester < lane.requester)) {
			lane, rank = l, r
		}
	}
	lane.lastPick, lane.ranked = s.picks, rank
	if seq, ok := lane.takeDue(now); ok {
		return best, lane, seq
	}
	return best, lane, 0
}

// readyRank says whether the lane is ready (laneReady) and ranks it: the
// priority of its best waiting job as this broker knows it, without a
// read: the best of its priorities with a message read ahead or that may
// have work past what it read (not dry), and of its deferred message due,
// which a pick of the lane looks at first; else its best priority read to
// its end, else job.DefaultPriority (so that lanes with no priority set
// all rank alike).
func (l *laneQ) readyRank(now time.Time) (int, bool) {
	p := 0
	if len(l.dues) > 0 {
		if top, ok := l.firstDue(); ok && !top.due.After(now) {
			if p = l.deferred[top.seq].priority; p == 0 {
				p = job.DefaultPriority
			}
		}
	}
	if p == 0 && !l.work && (l.recheck.IsZero() || l.recheck.After(now)) {
		return 0, false
	}
	if q := (l.works &^ l.dry) | l.aheadIn; q != 0 && (p == 0 || q.best() < p) {
		p = q.best()
	}
	if p == 0 {
		// Read to its end: the lane looks past its cursor again in its
		// turn at that priority (a notice may have come ahead of its
		// message), not ahead of the lanes with work known.
		p = l.works.best()
	}
	if p == 0 {
		p = job.DefaultPriority
	}
	return p, true
}

func laneReady(l *laneQ, now time.Time) bool {
	if l.work || (!l.recheck.IsZero() && !l.recheck.After(now)) {
		return true
	}
	top, ok := l.firstDue()
	return ok && !top.due.After(now)
}

// forgetIdleLocked drops lanes with nothing to do and tenants without
// lanes, so memory follows the work, not every requester ever seen.
func (s *sched) forgetIdleLocked(now time.Time) {
	for name, t := range s.tenants {
		for r, l := range t.lanes {
			if !l.work && len(l.deferred) == 0 && l.aheadLen() == 0 && (l.recheck.IsZero() || l.recheck.Before(now)) {
				delete(t.lanes, r)
			}
		}
		if len(t.lanes) == 0 && t.held == 0 {
			delete(s.tenants, name)
		}
	}
	for key, q := range s.parked {
		if len(q.msgs) == 0 && q.probeAt.Before(now) {
			delete(s.parked, key)
		}
	}
}

// read returns the next message of a picked lane: the deferred one at seq,
// else the oldest from the lane's cursor; nil when the lane has none now.
func (s *sched) read(ctx context.Context, t *tenantQ, l *laneQ, seq uint64) (*natsjs.LaneMsg, error) {
	if seq != 0 {
		return s.lanes.At(ctx, seq)
	}
	select {
	case l.turn <- struct{}{}:
		defer func() { <-l.turn }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	emptied := false
	for range 16 {
		s.mu.Lock()
		// The best priority that may have work: its read-ahead, else a
		// read from its cursor (the default priority's filter reads the
		// lane as before, when no job names another).
		p := l.bestPriority()
		if emptied && p > l.ranked && l.ranked != 0 {
			// Picked for a priority it has no more of: another requester
			// may have better.
			s.mu.Unlock()
			return nil, nil
		}
		if p == 0 {
			l.work = false
			now := s.b.cfg.Now()
			if since := now.Sub(l.noticed); since < noticeLimit {
				l.recheck = now.Add(recheckAfter(since))
				// A notice ahead of its message: its priority is read
				// again from where it was.
				l.works = l.noticedAt
			} else {
				l.recheck, l.noticedAt = time.Time{}, 0
			}
			s.mu.Unlock()
			return nil, nil
		}
		if msg := s.popAheadLocked(l, p); msg != nil {
			s.mu.Unlock()
			return msg, nil
		}
		from, heard := l.cursor[p], l.heard[p]
		n, room := readAhead, aheadBytes-s.aheadSize
		if s.ahead+n > aheadMax || room <= 0 {
			n, room = 1, 0
		}
		s.mu.Unlock()
		msgs, err := s.lanes.OldestBatchAt(ctx, t.name, l.requester, p, from, n, room)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		if len(msgs) == 0 {
			l.works = l.works.without(p)
			emptied = true
			s.mu.Unlock()
			continue
		}
		// Its last message read: the priority has no more waiting past it
		// (unless news of one came meanwhile).
		if msgs[len(msgs)-1].Last && l.heard[p] == heard {
			l.dry = l.dry.with(p)
		} else {
			l.dry = l.dry.without(p)
		}
		for _, m := range msgs {
			if m.Seq >= l.cursor[p] {
				l.cursor[p] = m.Seq + 1
				l.ahead[p] = append(l.ahead[p], m)
				l.aheadIn = l.aheadIn.with(p)
				s.ahead++
				s.aheadSize += m.Size
			}
		}
		msg := s.popAheadLocked(l, p)
		s.mu.Unlock()
		if msg != nil {
			return msg, nil
		}
	}
	return nil, nil
}

// recheckAfter is how long a lane whose read found nothing, since its
// last notice, waits for its next read (noticeGrace).
func recheckAfter(since time.Duration) time.Duration {
	if since < noticeGrace {
		return recheckSoon
	}
	return min(since/2, recheckMax)
}

// bestPriority is the lane's best priority with a message read ahead or
// work, 0 when none has.
func (l *laneQ) bestPriority() int {
	return (l.works | l.aheadIn).best()
}

// prioSet is a set of priorities (1 to 5), bit p for priority p.
type prioSet uint8

func (ps prioSet) has(p int) bool        { return ps&(1<<p) != 0 }
func (ps prioSet) with(p int) prioSet    { return ps | 1<<p }
func (ps prioSet) without(p int) prioSet { return ps &^ (1 << p) }

// best is the set's best priority, 0 when it is empty.
func (ps prioSet) best() int {
	if ps == 0 {
		return 0
	}
	return bits.TrailingZeros8(uint8(ps))
}

// aheadLen counts the lane's messages read ahead.
func (l *laneQ) aheadLen() int {
	n := 0
	for _, a := range l.ahead {
		n += len(a)
	}
	return n
}

// popAheadLocked takes the lane's oldest message read ahead that no other
// request of this broker has, or nil.
func (s *sched) popAheadLocked(l *laneQ, p int) *natsjs.LaneMsg {
	for len(l.ahead[p]) > 0 {
		msg := l.ahead[p][0]
		l.ahead[p][0] = nil
		l.ahead[p] = l.ahead[p][1:]
		if len(l.ahead[p]) == 0 {
			l.aheadIn = l.aheadIn.without(p)
		}
		s.ahead--
		s.aheadSize -= msg.Size
		if !l.taken[msg.Seq] {
			l.taken[msg.Seq] = true
			return msg
		}
	}
	return nil
}

// settled ends a message's read: it is deferred or removed now.
func (s *sched) settled(msg *natsjs.LaneMsg) {
	s.mu.Lock()
	if t := s.tenants[msg.Tenant]; t != nil {
		if l := t.lanes[msg.Requester]; l != nil {
			delete(l.taken, msg.Seq)
		}
	}
	s.mu.Unlock()
}

// later looks at a message again at due.
func (s *sched) later(msg *natsjs.LaneMsg, due time.Time) {
	s.mu.Lock()
	prio := msg.Priority
	if prio == 0 && msg.Rec != nil {
		prio = msg.Rec.PriorityOr()
	}
	if h := s.held[msg.Key]; prio == 0 && h != nil && h.seq == msg.Seq {
		prio = h.priority
	}
	s.deferLocked(s.laneLocked(msg.Tenant, msg.Requester), msg.Seq, due, prio)
	s.mu.Unlock()
}

// hold counts a claim this broker made of msg's job against its tenant's
// cap until finish, with the record the claim wrote and its event's
// sequence.
func (s *sched) hold(msg *natsjs.LaneMsg, rec *job.Record, event uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.held[msg.Key]; ok {
		s.unreserveLocked(msg.Tenant) // held already: the pick's slot goes back
	}
	prio := msg.Priority
	if prio == 0 && rec != nil {
		prio = rec.PriorityOr()
	}
	s.held[msg.Key] = &holding{tenant: msg.Tenant, requester: msg.Requester, seq: msg.Seq, priority: prio, rec: rec, event: event}
}

// known returns the record of a held job as this broker last wrote it and
// its newest event's sequence; nil and 0 when this broker holds no claim of
// it (another broker made it) or the claim ended.
func (s *sched) known(key string) (*job.Record, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.held[key]; h != nil {
		return h.rec, h.event
	}
	return nil, 0
}

// wrote keeps what this broker wrote of a held job and the sequence of the
// event it published of it (0: none).
func (s *sched) wrote(rec *job.Record, event uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[rec.Key()]
	if h == nil {
		return
	}
	if h.rec == nil || rec.Revision > h.rec.Revision {
		h.rec = rec
	}
	h.event = max(h.event, event)
}

// retryAt looks at a held job's work message again when its retry is due;
// the job keeps its slot, and no claim stands until then.
func (s *sched) retryAt(key string, due time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[key]
	if h == nil {
		return
	}
	h.rec = nil
	s.deferLocked(s.laneLocked(h.tenant, h.requester), h.seq, due, h.priority)
}

// unreserve gives back the slot a pick reserved when it led to no claim.
func (s *sched) unreserve(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unreserveLocked(tenant)
}

func (s *sched) unreserveLocked(tenant string) {
	if t := s.tenants[tenant]; t != nil && t.held > 0 {
		t.held--
	}
	if s.b.cfg.capOf(tenant) > 0 {
		s.wakeOneLocked() // a capped tenant's slot is free again
	}
}

// finish ends this broker's hold of a job that needs its slot no more and
// forgets its deferred work message, returning the hold (nil: none).
func (s *sched) finish(key string) *holding {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[key]
	if h == nil {
		return nil
	}
	delete(s.held, key)
	if t := s.tenants[h.tenant]; t != nil {
		if t.held > 0 {
			t.held--
		}
		if l := t.lanes[h.requester]; l != nil {
			l.undefer(h.seq)
		}
	}
	if s.b.cfg.capOf(h.tenant) > 0 {
		s.wakeOneLocked() // a capped tenant's slot is free again
	}
	return h
}

// waiter is a regular request waiting: woken gets a token when news of
// work chose it (and it is off the list).
type waiter struct {
	woken chan struct{}
}

// generation is the count of news so far: a request that then finds
// nothing to pick passes it to wait.
func (s *sched) generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// wait blocks until news of work (since gen, the news count when the
// request last looked: news in between returns at once), a deferred
// message's due time (at most idleWake) or ctx's end. A newcomer request
// (allow set: the tenants it may take) wakes on every news; a regular one
// when chosen (wakeOneLocked), by a due time or by news for all. A
// regular request chosen as ctx ended passes the news on; one chosen
// reports woken, and should it take work, it wakes the next one (passOn).
func (s *sched) wait(ctx context.Context, now time.Time, gen uint64, allow func(string) bool) (woken bool) {
	s.mu.Lock()
	if s.gen != gen {
		s.mu.Unlock()
		return false
	}
	newcomer := allow != nil
	// The earliest due time of a lane it may pick: a capped tenant's
	// comes up once a slot of it is free, which is news.
	next := now.Add(idleWake)
	for _, t := range s.tenants {
		if allow != nil && !allow(t.name) {
			continue
		}
		if limit := s.b.cfg.capOf(t.name); limit > 0 && t.held >= limit {
			continue
		}
		for _, l := range t.lanes {
			if top, ok := l.firstDue(); ok && top.due.Before(next) {
				next = top.due
			}
			if !l.recheck.IsZero() && l.recheck.Before(next) {
				next = l.recheck
			}
		}
	}
	wake, news := s.wake, s.news
	var w *waiter
	var e *list.Element
	var timeout <-chan time.Time
	if newcomer {
		s.newcomers++
		timer := time.NewTimer(max(next.Sub(now), time.Millisecond))
		defer timer.Stop()
		timeout = timer.C
	} else {
		w = &waiter{woken: make(chan struct{}, 1)}
		e = s.waiters.PushBack(w)
		if next.Before(now.Add(idleWake)) {
			s.armLocked(now, next)
		}
		timer := time.NewTimer(idleWake)
		defer timer.Stop()
		timeout = timer.C
	}
	s.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-wake:
	case <-news:
	case <-w.wokenOrNil():
		woken = true
	case <-timeout:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if newcomer {
		s.newcomers--
		return false
	}
	if !woken {
		select {
		case <-w.woken:
			woken = true
		default:
			s.waiters.Remove(e)
		}
	}
	if woken && ctx.Err() != nil {
		// Chosen as it ended: the next one looks in its stead.
		s.wakeOneLocked()
		return false
	}
	return woken
}

func (w *waiter) wokenOrNil() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.woken
}

// passOn wakes the next waiting request after a woken one took work,
// while some lane has work or a message due: the news it was woken for may
// be one of a burst.
func (s *sched) passOn(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiters.Len() == 0 {
		return
	}
	for _, t := range s.tenants {
		if limit := s.b.cfg.capOf(t.name); limit > 0 && t.held >= limit {
			continue
		}
		for _, l := range t.lanes {
			if laneReady(l, now) {
				s.waiters.Remove(s.waiters.Front()).(*waiter).woken <- struct{}{}
				return
			}
		}
	}
}

// deferLocked sets when l looks at seq, of priority (0: as known), again,
// setting the timer for it when requests wait.
func (s *sched) deferLocked(l *laneQ, seq uint64, due time.Time, priority int) {
	l.deferTo(seq, due, priority)
	if s.waiters.Len() > 0 {
		s.armLocked(s.b.cfg.Now(), due)
	}
}

// armLocked sets the timer to wake a waiting request at at, unless it is
// set earlier already.
func (s *sched) armLocked(now, at time.Time) {
	if !s.timerAt.IsZero() && !s.timerAt.After(at) {
		return
	}
	s.timerAt = at
	d := max(at.Sub(now), time.Millisecond)
	if s.timer == nil {
		s.timer = time.AfterFunc(d, s.due)
		return
	}
	s.timer.Reset(d)
}

// due is the timer's: a deferred message or a recheck fell due.
func (s *sched) due() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timerAt = time.Time{}
	s.wakeOneLocked()
}

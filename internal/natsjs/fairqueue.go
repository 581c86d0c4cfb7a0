package natsjs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jobgate/jobgate/pkg/job"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A job type's work is queued per tenant and, within a tenant, per
// requester: each requester with work of the type has its own durable pull
// consumer on JOBGATE_WORK (RequesterWorkConsumer), shared by every worker
// process of the type. A worker with a free slot takes the next tenant in
// a weighted round-robin over the tenants that have work, then the next of
// that tenant's requesters with work in a plain round-robin, so a tenant
// with a deep backlog gets its share of the slots, not all of them, and so
// does a requester within its tenant (Hatchet's GROUP_ROUND_ROBIN, with
// weights, on two levels). A tenant alone with one requester still gets
// every slot.
//
// A tenant with a cap (FairConfig.MaxRunning, MaxRunningFor) keeps one
// consumer for all its work instead (TenantWorkConsumer): the cap is that
// consumer's MaxAckPending, which JetStream enforces across every process,
// and no count kept by the workers could. The trade-off: a capped
// tenant's requesters share its queue first in, first out. A work-queue
// stream refuses consumers with overlapping filters, so a tenant's
// consumer and its requesters' consumers never exist at once: whoever
// creates one removes the others (see consumer), and the jobs they held
// become deliverable to it. That is how a cap added or removed, or an
// upgrade from the per-tenant queues, takes effect; every process of a type
// must therefore agree on the caps, or they keep taking each other's
// consumers away (no job is lost or run twice meanwhile, but each switch
// costs a redelivery).
//
// What a requester costs: one JetStream consumer while it has work (in a
// cluster an R3 raft group, created on its first pull), which the server
// removes after requesterInactive without pulls; in each process a few
// hundred bytes while it has work, and for at most keepIdle after, for at
// most idleRequesters of a tenant. A flood of requesters thus costs
// consumer creations and server state in proportion to the requesters
// with queued work, and the scan lists one subject per queued job, as it
// did before.
//
// Every queue keeps every guarantee of the former single queue per type:
// it is a durable consumer with explicit acks, unlimited deliveries and
// the same ack wait, so a job whose worker dies comes back to another
// worker, and claims stay compare-and-sets on the job record. A second
// delivery of a running job (its queue's consumer replaced meanwhile) is
// handed back by the claim check while its worker lives, never run twice.

// FairConfig shapes a type's per-tenant work queues. Every worker process
// of the type must agree on AckWait and the caps (the last to start wins
// an update of a tenant's consumer); weights are each process's own.
type FairConfig struct {
	// Type is the job type.
	Type string
	// AckWait: see WorkConsumer.
	AckWait time.Duration
	// MaxRunning caps how many work messages of one tenant all the type's
	// workers hold at once (delivered, not yet acknowledged; a retry
	// waiting for its time counts). 0: no cap (10,000).
	MaxRunning int
	// MaxRunningFor overrides MaxRunning for single tenants.
	MaxRunningFor map[string]int
	// Weights: a tenant of weight 3 is offered three slots for every one
	// of a tenant of the default weight 1 while both have work.
	Weights map[string]int
	// Scan is how often a worker with free slots looks for tenants with
	// new work. Default 100ms.
	Scan time.Duration
	// Inactive: the server removes a capped tenant's consumer after this
	// long without pulls (a tenant with work is pulled at least every
	// Scan), a requester's after at most requesterInactive. Default 10m.
	Inactive time.Duration
}

// noCap is the MaxAckPending of a tenant without a cap.
const noCap = 10000

// fullScanEvery: messages can become deliverable without a new publish (a
// retry's delay ran out, an ack wait expired); a full scan at least this
// often finds them.
const fullScanEvery = time.Second

// listShare bounds the time a process spends listing the work stream's
// subjects. A listing names every subject with work, one per queued job, so
// it costs in proportion to the backlog (about 6 ms at 1,000 queued jobs,
// 350 ms at 100,000, server and client together): while work kept being
// published a process listed without pause and spent a core on it. After a
// listing that took d, the next waits until listShare × d has passed since
// it began, so listings take at most 1/listShare of the time. A small
// backlog lists as often as before; a large one delays finding a tenant
// that is new to this process by at most listShare listings' time, and
// tenants already known are pulled meanwhile.
const listShare = 4

// keepIdle is how long a tenant whose work ran out stays known to this
// process: its consumer is long-polled by idle slots, so its next job
// starts at once instead of at the next scan.
const keepIdle = time.Minute

// checkEvery bounds how often a process asks the stream whether anything
// was published: a slot that comes back for work looks (a cheap stream
// info) unless another did within this long, so a newly submitted job is
// seen by the next slot that frees, not at the next Scan.
const checkEvery = 5 * time.Millisecond

// idleWatch bounds the queues idle slots long-poll, most recently busy
// first.
const idleWatch = 8

// idleRequesters bounds the requesters without work a process keeps of a
// tenant (the most recently busy), so a flood of one-off requesters does
// not grow its memory beyond the requesters with work.
const idleRequesters = 16

// requesterInactive: the server removes a requester's consumer after this
// long without pulls. Shorter than a tenant's default (requesters come and
// go in greater numbers): a requester whose work waits its turn longer
// than this has its consumer created again at its next pull.
const requesterInactive = 2 * keepIdle

// errConsumerNotUnique is JetStream's answer to a consumer whose filter
// overlaps another's on a work-queue stream.
const errConsumerNotUnique jetstream.ErrorCode = 10100

// FairQueue is one job type's per-tenant work queues as the workers of one
// process see them. Next is safe for concurrent use by the type's slots.
type FairQueue struct {
	js  jetstream.JetStream
	cfg FairConfig

	scanMu sync.Mutex // one scan at a time

	mu        sync.Mutex
	stream    jetstream.Stream
	tenants   map[string]*tenantQueue
	idleTurn  int
	picks     uint64
	scannedAt time.Time
	fullAt    time.Time     // when the last listing began
	fullTook  time.Duration // how long it took
	lastSeq   uint64
	listed    time.Duration // time spent listing, in all (tests)

	notices *nats.Subscription
}

type tenantQueue struct {
	name    string
	weight  int
	current int // smooth weighted round-robin state
	// pending: one of the tenant's queues has work (see lane.pending).
	pending bool
	// seen is when the tenant last had work.
	seen time.Time
	// fresh: the tenant has work again after it had none; lastPick is
	// the pick count when it was last picked.
	fresh    bool
	lastPick uint64
	// capped: the tenant's work is one queue (lane ""), on its tenant
	// consumer; else one queue per requester.
	capped       bool
	lanes        map[string]*lane
	pendingLanes int
}

// lane is one queue of a tenant: a requester's, or the whole tenant's
// (requester "") when it has a cap.
type lane struct {
	tenant    *tenantQueue
	requester string
	// pending: the last scan saw work in the queue and no pull since
	// came back empty.
	pending bool
	// seen is when the queue last had work.
	seen     time.Time
	lastPick uint64
	cons     jetstream.Consumer
}

// OpenFairQueue returns a type's per-tenant work queues. It removes the
// single per-type consumer of earlier versions: a work-queue stream refuses
// consumers with overlapping filters, and the jobs it held become
// deliverable to the tenants' consumers (a second delivery of a job that is
// running is handed back by its claim check while its worker lives, never run twice).
func OpenFairQueue(ctx context.Context, js jetstream.JetStream, cfg FairConfig) (*FairQueue, error) {
	if cfg.AckWait <= 0 || !job.ValidTypeName(cfg.Type) {
		return nil, errors.New("work queue: a valid type and a positive ack wait are required")
	}
	if cfg.Scan <= 0 {
		cfg.Scan = 100 * time.Millisecond
	}
	if cfg.Inactive <= 0 {
		cfg.Inactive = 10 * time.Minute
	}
	s, err := js.Stream(ctx, StreamWork)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", StreamWork, mapErr(err))
	}
	err = js.DeleteConsumer(ctx, StreamWork, WorkConsumerName(cfg.Type))
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("remove consumer %s: %w", WorkConsumerName(cfg.Type), mapErr(err))
	}
	q := &FairQueue{js: js, cfg: cfg, stream: s, tenants: map[string]*tenantQueue{}}
	// A subscription that fails (credentials without it) leaves the
	// listing to find the work, as before notices.
	q.notices, _ = js.Conn().Subscribe(TypeWork(cfg.Type), q.notice)
	return q, nil
}

// Close stops the queue's notices of new work.
func (q *FairQueue) Close() {
	if q.notices != nil {
		_ = q.notices.Unsubscribe()
	}
}

// notice learns of a work message published for the type from its subject,
// which names the tenant and the requester: their queue is pulled at the
// next pick instead of after the next listing, which a large backlog puts
// far apart (listShare). Notices are core NATS messages, seen as the server
// routes the publish: one missed (a reconnect, a slow subscriber,
// credentials that do not allow the subscription) is found by a listing.
func (q *FairQueue) notice(m *nats.Msg) {
	tenant, requester, _, ok := ScopeOf(m.Subject)
	if !ok {
		return
	}
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	t := q.tenantLocked(tenant)
	t.sawWork(now)
	t.markWork(requester, now)
}

// tenantLocked returns the tenant's queues, added if new (q.mu held).
func (q *FairQueue) tenantLocked(name string) *tenantQueue {
	t := q.tenants[name]
	if t == nil {
		t = &tenantQueue{name: name, weight: q.cfg.weight(name), capped: q.cfg.Capped(name), lanes: map[string]*lane{}}
		q.tenants[name] = t
	}
	return t
}

// sawWork notes that the tenant had work at now: a tenant whose work comes
// back takes the next pick (fresh).
func (t *tenantQueue) sawWork(now time.Time) {
	t.fresh = t.fresh || !t.pending
	t.seen = later(t.seen, now)
}

// markWork marks the requester's queue (a capped tenant's one queue) as
// having work at now.
func (t *tenantQueue) markWork(requester string, now time.Time) {
	if t.capped {
		requester = ""
	}
	l := t.lanes[requester]
	if l == nil {
		l = &lane{tenant: t, requester: requester}
		t.lanes[requester] = l
	}
	l.seen = later(l.seen, now)
	setPending(l, true)
}

// TenantWorkConsumer is the consumer configuration of one tenant's work of
// a type.
func (c FairConfig) TenantWorkConsumer(tenant string) jetstream.ConsumerConfig {
	limit := c.MaxRunning
	if n, ok := c.MaxRunningFor[tenant]; ok {
		limit = n
	}
	if limit <= 0 || limit > noCap {
		limit = noCap
	}
	return jetstream.ConsumerConfig{
		Durable:           TenantWorkConsumerName(c.Type, tenant),
		Description:       "jobgate workers of job type " + c.Type + ": the work of tenant " + tenant,
		FilterSubject:     TenantWork(c.Type, tenant),
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           c.AckWait,
		MaxDeliver:        -1,
		MaxAckPending:     limit,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: c.Inactive,
	}
}

// RequesterWorkConsumer is the consumer configuration of one requester's
// work of a type, for a tenant without a cap.
func (c FairConfig) RequesterWorkConsumer(tenant, requester string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:           RequesterWorkConsumerName(c.Type, tenant, requester),
		Description:       "jobgate workers of job type " + c.Type + ": the work of requester " + requester + " of tenant " + tenant,
		FilterSubject:     RequesterWork(c.Type, tenant, requester),
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           c.AckWait,
		MaxDeliver:        -1,
		MaxAckPending:     noCap,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: min(c.Inactive, requesterInactive),
	}
}

// Capped reports whether a tenant has a cap, and so one queue for all its
// requesters.
func (c FairConfig) Capped(tenant string) bool {
	limit := c.MaxRunning
	if n, ok := c.MaxRunningFor[tenant]; ok {
		limit = n
	}
	return limit > 0
}

// laneConsumer is the consumer configuration of a queue.
func (c FairConfig) laneConsumer(tenant, requester string) jetstream.ConsumerConfig {
	if requester == "" {
		return c.TenantWorkConsumer(tenant)
	}
	return c.RequesterWorkConsumer(tenant, requester)
}

func (c FairConfig) weight(tenant string) int {
	if w, ok := c.Weights[tenant]; ok && w > 0 {
		return w
	}
	return 1
}

// Next waits, up to ctx's end, for one delivery from the tenant whose turn
// it is. It returns nil, nil when no work came in time. With no tenant's
// work waiting, the slot long-polls the queue of a recently busy tenant
// until the next scan is due: a job of a tenant that had work within the
// last minute starts at once, that of any other within Scan.
func (q *FairQueue) Next(ctx context.Context) (*WorkMsg, error) {
	return q.next(ctx, nil)
}

// NextNewcomer is Next for a slot kept for tenants that allow accepts
// (the worker's: those with none of their jobs running): it takes work only
// of them, the least recently served first, and leaves the round-robin
// turns of the other slots as they are.
func (q *FairQueue) NextNewcomer(ctx context.Context, allow func(tenant string) bool) (*WorkMsg, error) {
	return q.next(ctx, allow)
}

func (q *FairQueue) next(ctx context.Context, allow func(string) bool) (*WorkMsg, error) {
	for {
		if err := q.scan(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, nil
			}
			return nil, err
		}
		for {
			l := q.pickLane(allow)
			if l == nil {
				break
			}
			msg, err := q.pull(ctx, l, 0)
			if err != nil {
				if ctx.Err() != nil {
					return nil, nil
				}
				return nil, err
			}
			if msg != nil {
				return msg, nil
			}
		}
		if l := q.idle(allow); l != nil {
			msg, err := q.pull(ctx, l, q.cfg.Scan)
			if err != nil || msg != nil {
				if ctx.Err() != nil && msg == nil {
					return nil, nil
				}
				return msg, err
			}
			continue
		}
		wait := q.cfg.Scan
		if allow != nil {
			// A newcomer's first job should not wait a whole scan period
			// behind the backlog that keeps the other slots busy; the
			// look at the stream is cheap and rate-limited (checkEvery).
			wait = min(wait, newcomerLook)
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(wait):
		}
	}
}

// newcomerLook is how often a newcomer slot with nothing to take looks for
// a tenant it may serve.
const newcomerLook = 10 * time.Millisecond

// idle picks the queue an idle slot long-polls: in turn among the most
// recently busy known queues (of the tenants allow accepts, when it is
// set). A job of a queue not watched waits for the next scan (at most
// Scan).
func (q *FairQueue) idle(allow func(string) bool) *lane {
	q.mu.Lock()
	defer q.mu.Unlock()
	var recent []*lane
	for _, t := range q.tenants {
		if allow != nil && !allow(t.name) {
			continue
		}
		for _, l := range t.lanes {
			recent = append(recent, l)
		}
	}
	if len(recent) == 0 {
		return nil
	}
	slices.SortFunc(recent, func(a, b *lane) int {
		if c := b.seen.Compare(a.seen); c != 0 {
			return c
		}
		if c := strings.Compare(a.tenant.name, b.tenant.name); c != 0 {
			return c
		}
		return strings.Compare(a.requester, b.requester)
	})
	recent = recent[:min(len(recent), idleWatch)]
	q.idleTurn++
	return recent[q.idleTurn%len(recent)]
}

// pickLane takes the tenant whose turn it is (pick, or the newcomer pick
// when allow is set), then the queue of that tenant's whose turn it is:
// of its requesters with work, the least recently picked, which makes a
// round-robin in which a requester whose work comes back after none goes
// first.
func (q *FairQueue) pickLane(allow func(string) bool) *lane {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		var t *tenantQueue
		if allow != nil {
			t = q.pickNewcomerLocked(allow)
		} else {
			t = q.pickLocked()
		}
		if t == nil {
			return nil
		}
		var best *lane
		for _, l := range t.lanes {
			if l.pending && (best == nil || l.lastPick < best.lastPick ||
				(l.lastPick == best.lastPick && l.requester < best.requester)) {
				best = l
			}
		}
		if best != nil {
			best.lastPick = q.picks
			return best
		}
		t.pending = false // no queue with work: not a tenant with work
	}
}

// pick takes the next tenant with work by smooth weighted round-robin:
// every tenant with work gains its weight, the richest is picked and pays
// the sum. Over any stretch a tenant of weight w is picked w times for
// every pick of a tenant of weight 1, spread evenly. A tenant whose work
// comes back after none joins level with the richest and wins the tie
// (ties go to the least recently picked): its job takes the next free
// slot, as a newcomer's turn in a round-robin comes first.
func (q *FairQueue) pick(allow func(string) bool) *tenantQueue {
	q.mu.Lock()
	defer q.mu.Unlock()
	if allow != nil {
		return q.pickNewcomerLocked(allow)
	}
	return q.pickLocked()
}

func (q *FairQueue) pickLocked() *tenantQueue {
	top, any := 0, false
	for _, t := range q.tenants {
		if t.pending && !t.fresh && (!any || t.current > top) {
			top, any = t.current, true
		}
	}
	var best *tenantQueue
	total := 0
	for _, t := range q.tenants {
		if !t.pending {
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
		q.picks++
		best.lastPick = q.picks
	}
	return best
}

// pickNewcomerLocked takes, of the tenants with work that allow accepts,
// the least recently picked; the round-robin state stays as it is.
func (q *FairQueue) pickNewcomerLocked(allow func(string) bool) *tenantQueue {
	var best *tenantQueue
	for _, t := range q.tenants {
		if !t.pending || !allow(t.name) {
			continue
		}
		if best == nil || t.lastPick < best.lastPick || (t.lastPick == best.lastPick && t.name < best.name) {
			best = t
		}
	}
	if best != nil {
		q.picks++
		best.lastPick = q.picks
	}
	return best
}

// pull takes one message of a queue, waiting up to wait (0: not at all).
func (q *FairQueue) pull(ctx context.Context, l *lane, wait time.Duration) (*WorkMsg, error) {
	q.mu.Lock()
	cons := l.cons
	q.mu.Unlock()
	if cons == nil {
		c, err := q.consumer(ctx, l.tenant.name, l.requester)
		if err != nil {
			q.settle(l, nil, false)
			return nil, err
		}
		cons = c
	}
	var batch jetstream.MessageBatch
	var err error
	if wait > 0 {
		if d, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(d))
		}
		if wait < time.Millisecond {
			return nil, nil
		}
		batch, err = cons.Fetch(1, jetstream.FetchMaxWait(wait))
	} else {
		batch, err = cons.FetchNoWait(1)
	}
	var msg jetstream.Msg
	if err == nil {
		for m := range batch.Messages() {
			msg = m
		}
		err = batch.Error()
	}
	if err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
		// The consumer may be gone (removed when idle, by an operator,
		// or by a process that switched the tenant's queues; its pulls
		// then find no responder): the next pick creates it again.
		q.settle(l, nil, false)
		if !errors.Is(err, nats.ErrNoResponders) && Unavailable(mapErr(err)) {
			return nil, fmt.Errorf("pull work of %s: %w", l.tenant.name, mapErr(err))
		}
		return nil, nil
	}
	q.settle(l, cons, msg != nil)
	if msg == nil {
		return nil, nil
	}
	return newWorkMsg(msg), nil
}

// consumer creates (or finds) the consumer of a queue. A work-queue stream
// refuses it while another consumer's filter overlaps its own: a tenant's
// consumer where requesters' are wanted or the other way round (a cap
// added or removed), or the per-type consumer of earlier versions. Those
// are jobgate's workers' own, of a layout this process does not use: they
// are removed, the jobs they held become deliverable to the new one, and
// the create is tried again.
func (q *FairQueue) consumer(ctx context.Context, tenant, requester string) (jetstream.Consumer, error) {
	cfg := q.cfg.laneConsumer(tenant, requester)
	c, err := q.js.CreateOrUpdateConsumer(ctx, StreamWork, cfg)
	var api *jetstream.APIError
	if errors.As(err, &api) && api.ErrorCode == errConsumerNotUnique {
		if rerr := q.removeOverlapping(ctx, cfg); rerr != nil {
			return nil, rerr
		}
		c, err = q.js.CreateOrUpdateConsumer(ctx, StreamWork, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", cfg.Durable, mapErr(err))
	}
	return c, nil
}

// removeOverlapping removes the workers' consumers whose filters overlap
// cfg's. Listing the stream's consumers is costly with many requesters;
// it is done only when a create was refused, once per switch of a tenant.
func (q *FairQueue) removeOverlapping(ctx context.Context, cfg jetstream.ConsumerConfig) error {
	var names []string
	list := q.stream.ListConsumers(ctx)
	for info := range list.Info() {
		if info.Name == cfg.Durable ||
			!(strings.HasPrefix(info.Name, workConsumerPre) || strings.HasPrefix(info.Name, requesterConsumerPre)) {
			continue
		}
		filters := info.Config.FilterSubjects
		if info.Config.FilterSubject != "" {
			filters = append(filters, info.Config.FilterSubject)
		}
		for _, f := range filters {
			if server.SubjectsCollide(f, cfg.FilterSubject) {
				names = append(names, info.Name)
				break
			}
		}
	}
	if err := list.Err(); err != nil {
		return fmt.Errorf("list consumers of %s: %w", StreamWork, mapErr(err))
	}
	for _, name := range names {
		err := q.js.DeleteConsumer(ctx, StreamWork, name)
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("remove consumer %s: %w", name, mapErr(err))
		}
	}
	return nil
}

func (q *FairQueue) settle(l *lane, cons jetstream.Consumer, got bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l.cons = cons
	if got {
		now := time.Now()
		l.seen, l.tenant.seen = now, now
	} else {
		setPending(l, false)
	}
}

// setPending marks a queue with work or without, and its tenant with work
// while one of its queues has.
func setPending(l *lane, pending bool) {
	if l.pending == pending {
		return
	}
	l.pending = pending
	if pending {
		l.tenant.pendingLanes++
	} else {
		l.tenant.pendingLanes--
	}
	l.tenant.pending = l.tenant.pendingLanes > 0
}

// scan finds the tenants and requesters with work of the type, at most
// every Scan. The stream's last sequence says cheaply whether anything was
// published since the last look; only then, or every fullScanEvery, are
// the subjects with messages listed. A slot that finds a scan under way
// goes on with what is known.
func (q *FairQueue) scan(ctx context.Context) error {
	q.mu.Lock()
	due := time.Since(q.scannedAt) >= checkEvery
	q.mu.Unlock()
	if !due || !q.scanMu.TryLock() {
		return nil
	}
	defer q.scanMu.Unlock()
	info, err := q.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream %s: %w", StreamWork, mapErr(err))
	}
	now := time.Now()
	q.mu.Lock()
	since, gap := now.Sub(q.fullAt), listShare*q.fullTook
	full := (info.State.LastSeq != q.lastSeq && since >= gap) || since >= max(fullScanEvery, gap)
	if !full {
		q.scannedAt = now
	}
	q.mu.Unlock()
	if !full {
		return nil
	}
	subj, err := q.stream.Info(ctx, jetstream.WithSubjectFilter(TypeWork(q.cfg.Type)))
	took := time.Since(now)
	q.mu.Lock()
	q.fullAt, q.listed = now, q.listed+took
	if err == nil { // a failed listing (an outage's timeout) is no measure of the next
		q.fullTook = took
	}
	q.mu.Unlock()
	if err != nil {
		return fmt.Errorf("stream %s: %w", StreamWork, mapErr(err))
	}
	with := map[string]map[string]bool{} // tenant → its requesters with work
	for s := range subj.State.Subjects {
		if tenant, requester, _, ok := ScopeOf(s); ok {
			if with[tenant] == nil {
				with[tenant] = map[string]bool{}
			}
			with[tenant][requester] = true
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.scannedAt, q.lastSeq = now, subj.State.LastSeq
	for name := range with {
		q.tenantLocked(name).sawWork(now)
	}
	for name, t := range q.tenants {
		if with[name] == nil && now.Sub(t.seen) > keepIdle {
			delete(q.tenants, name)
			continue
		}
		t.update(with[name], now)
	}
	return nil
}

// update marks the tenant's queues with work (requesters lists its
// requesters with work) and forgets the requesters without work for
// longer than keepIdle, or beyond the idleRequesters most recently busy.
func (t *tenantQueue) update(requesters map[string]bool, now time.Time) {
	if t.capped && len(requesters) > 0 {
		requesters = map[string]bool{"": true}
	}
	for r := range requesters {
		t.markWork(r, now)
	}
	var idle []*lane
	for r, l := range t.lanes {
		if requesters[r] || l.seen.After(now) { // or noticed since the listing began
			continue
		}
		setPending(l, false)
		if now.Sub(l.seen) > keepIdle {
			delete(t.lanes, r)
		} else {
			idle = append(idle, l)
		}
	}
	if len(idle) > idleRequesters {
		slices.SortFunc(idle, func(a, b *lane) int { return b.seen.Compare(a.seen) })
		for _, l := range idle[idleRequesters:] {
			delete(t.lanes, l.requester)
		}
	}
	t.pending = t.pendingLanes > 0
}

// later is the later of two times: a notice may have seen work after a
// listing began.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Tenants lists the tenants this process last saw with work, for tests and
// diagnostics.
func (q *FairQueue) Tenants() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.tenants))
	for name := range q.tenants {
		out = append(out, name)
	}
	return out
}

func newWorkMsg(msg jetstream.Msg) *WorkMsg {
	wm := &WorkMsg{msg: msg}
	if md, err := msg.Metadata(); err == nil {
		wm.Delivered = md.NumDelivered
	}
	if t, q, id, ok := ScopeOf(string(msg.Data())); ok {
		wm.Key = job.StoreKey(t, q, id)
	} else if t, q, id, ok := ScopeOf(msg.Subject()); ok {
		wm.Key = job.StoreKey(t, q, id)
	}
	return wm
}

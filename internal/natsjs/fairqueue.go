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
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A job type's work is queued per tenant: each tenant with work of the type
// has its own durable pull consumer on JOBGATE_WORK (TenantWorkConsumer),
// shared by every worker process of the type. A worker with a free slot
// takes the next tenant in a weighted round-robin over the tenants that
// have work, so a tenant with a deep backlog gets its share of the slots,
// not all of them (Hatchet's GROUP_ROUND_ROBIN, with weights). The cap on
// one tenant's jobs held at once is the consumer's MaxAckPending: JetStream
// enforces it across every process. A tenant alone still gets every slot.
//
// The queue of each tenant keeps every guarantee of the former single
// queue per type: it is a durable consumer with explicit acks, unlimited
// deliveries and the same ack wait, so a job whose worker dies comes back
// to another worker, and claims stay compare-and-sets on the job record.

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
	// Inactive: the server removes a tenant's consumer after this long
	// without pulls (a tenant with work is pulled at least every Scan).
	// Default 10m.
	Inactive time.Duration
}

// noCap is the MaxAckPending of a tenant without a cap.
const noCap = 10000

// fullScanEvery: messages can become deliverable without a new publish (a
// retry's delay ran out, an ack wait expired); a full scan at least this
// often finds them.
const fullScanEvery = time.Second

// keepIdle is how long a tenant whose work ran out stays known to this
// process: its consumer is long-polled by idle slots, so its next job
// starts at once instead of at the next scan.
const keepIdle = time.Minute

// checkEvery bounds how often a process asks the stream whether anything
// was published: a slot that comes back for work looks (a cheap stream
// info) unless another did within this long, so a newly submitted job is
// seen by the next slot that frees, not at the next Scan.
const checkEvery = 5 * time.Millisecond

// idleWatch bounds the tenants idle slots long-poll, most recently busy
// first.
const idleWatch = 8

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
	fullAt    time.Time
	lastSeq   uint64
}

type tenantQueue struct {
	name    string
	weight  int
	current int // smooth weighted round-robin state
	// pending: the last scan saw work of the tenant and no pull since
	// came back empty.
	pending bool
	// seen is when the tenant last had work.
	seen time.Time
	// fresh: the tenant has work again after it had none; lastPick is
	// the pick count when it was last picked.
	fresh    bool
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
	return &FairQueue{js: js, cfg: cfg, stream: s, tenants: map[string]*tenantQueue{}}, nil
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
			t := q.pick(allow)
			if t == nil {
				break
			}
			msg, err := q.pull(ctx, t, 0)
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
		if t := q.idle(allow); t != nil {
			msg, err := q.pull(ctx, t, q.cfg.Scan)
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

// idle picks the tenant an idle slot long-polls: in turn among the most
// recently busy known tenants (of those allow accepts, when it is set).
func (q *FairQueue) idle(allow func(string) bool) *tenantQueue {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.tenants) == 0 {
		return nil
	}
	recent := make([]*tenantQueue, 0, len(q.tenants))
	for _, t := range q.tenants {
		if allow == nil || allow(t.name) {
			recent = append(recent, t)
		}
	}
	if len(recent) == 0 {
		return nil
	}
	slices.SortFunc(recent, func(a, b *tenantQueue) int {
		if c := b.seen.Compare(a.seen); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	recent = recent[:min(len(recent), idleWatch)]
	q.idleTurn++
	return recent[q.idleTurn%len(recent)]
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

// pull takes one message of the tenant's work, waiting up to wait (0: not
// at all).
func (q *FairQueue) pull(ctx context.Context, t *tenantQueue, wait time.Duration) (*WorkMsg, error) {
	q.mu.Lock()
	cons := t.cons
	q.mu.Unlock()
	if cons == nil {
		c, err := q.js.CreateOrUpdateConsumer(ctx, StreamWork, q.cfg.TenantWorkConsumer(t.name))
		if err != nil {
			q.settle(t, nil, false)
			return nil, fmt.Errorf("consumer %s: %w", TenantWorkConsumerName(q.cfg.Type, t.name), mapErr(err))
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
		// The consumer may be gone (removed when idle, or by an
		// operator; its pulls then find no responder): the next pick
		// creates it again.
		q.settle(t, nil, false)
		if !errors.Is(err, nats.ErrNoResponders) && Unavailable(mapErr(err)) {
			return nil, fmt.Errorf("pull work of %s: %w", t.name, mapErr(err))
		}
		return nil, nil
	}
	q.settle(t, cons, msg != nil)
	if msg == nil {
		return nil, nil
	}
	return newWorkMsg(msg), nil
}

func (q *FairQueue) settle(t *tenantQueue, cons jetstream.Consumer, got bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t.cons = cons
	if got {
		t.seen = time.Now()
	} else {
		t.pending = false
	}
}

// scan finds the tenants with work of the type, at most every Scan. The
// stream's last sequence says cheaply whether anything was published since
// the last look; only then, or every fullScanEvery, are the subjects with
// messages listed. A slot that finds a scan under way goes on with what is
// known.
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
	full := info.State.LastSeq != q.lastSeq || now.Sub(q.fullAt) >= fullScanEvery
	if !full {
		q.scannedAt = now
	}
	q.mu.Unlock()
	if !full {
		return nil
	}
	subj, err := q.stream.Info(ctx, jetstream.WithSubjectFilter(TypeWork(q.cfg.Type)))
	if err != nil {
		return fmt.Errorf("stream %s: %w", StreamWork, mapErr(err))
	}
	with := map[string]bool{}
	for s := range subj.State.Subjects {
		if tenant, _, _, ok := ScopeOf(s); ok {
			with[tenant] = true
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.scannedAt, q.fullAt, q.lastSeq = now, now, subj.State.LastSeq
	for name, t := range q.tenants {
		switch {
		case with[name]:
			t.fresh = t.fresh || !t.pending
			t.pending, t.seen = true, now
		case now.Sub(t.seen) > keepIdle:
			delete(q.tenants, name)
		default:
			t.pending = false
		}
	}
	for name := range with {
		if _, ok := q.tenants[name]; !ok {
			q.tenants[name] = &tenantQueue{name: name, weight: q.cfg.weight(name), pending: true, fresh: true, seen: now}
		}
	}
	return nil
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

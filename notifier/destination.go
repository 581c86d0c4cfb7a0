package notifier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/tracing"
)

// A destination is where deliveries go and wait: one webhook endpoint, or
// the mail of one tenant. Each has its own durable consumer on
// JOBGATE_DELIVERIES, its own workers on every instance and its own cap on
// pending deliveries, so a receiver that fails, answers slowly or asks for
// an hour's pause (Retry-After) delays its own deliveries and nobody
// else's.
type destination struct {
	id     string    // "w" + endpoint key, or "m" + hash of the tenant
	tenant string    //
	ep     *endpoint // nil for mail

	mu        sync.Mutex
	pending   int       // tasks queued and not acknowledged, as last seen (+ own since)
	seenAt    time.Time // when pending was read from the consumer
	overflows int64     // tasks dropped because the destination was full
	warnedAt  time.Time // last overflow warning
	// waiting remembers, per job, the change this instance put off until
	// its next attempt: the job's later changes wait for it without asking
	// JetStream (bounded by the destination's cap; an entry goes when its
	// change is done or due).
	waiting map[string]heldChange
	// pausedUntil: the endpoint asked (429/503 + Retry-After) that nothing
	// be sent before then; this instance's deliverers of it stop pulling.
	pausedUntil time.Time
}

// pause makes the destination wait until until (never shortening a pause).
func (d *destination) pause(until time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !until.After(d.pausedUntil) {
		return false
	}
	d.pausedUntil = until
	return true
}

// paused reports until when the destination waits, if it does at now.
func (d *destination) paused(now time.Time) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pausedUntil, now.Before(d.pausedUntil)
}

// heldChange is a job's change waiting at a destination for its next
// attempt.
type heldChange struct {
	revision uint64
	due      time.Time
}

// heldUntil reports until when a change of job at revision rev must wait
// for an earlier change this instance knows to be waiting.
func (d *destination) heldUntil(jobID string, rev uint64, now time.Time) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h, ok := d.waiting[jobID]
	if !ok || rev == 0 || h.revision >= rev {
		return time.Time{}, false
	}
	if !h.due.After(now) {
		delete(d.waiting, jobID)
		return time.Time{}, false
	}
	return h.due, true
}

// hold records that a job's change waits until due; done forgets it.
func (d *destination) hold(jobID string, rev uint64, due time.Time, max int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.waiting == nil {
		d.waiting = map[string]heldChange{}
	}
	if _, ok := d.waiting[jobID]; !ok && len(d.waiting) >= max {
		return // a memo only: past the bound, the queue is asked instead
	}
	d.waiting[jobID] = heldChange{revision: rev, due: due}
}

func (d *destination) done(jobID string, rev uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if h, ok := d.waiting[jobID]; ok && h.revision == rev {
		delete(d.waiting, jobID)
	}
}

func (d *destination) channel() string {
	if d.ep == nil {
		return "mail"
	}
	return "webhook"
}

// mailDest names the mail destination of a tenant.
func mailDest(tenant string) string {
	h := sha256.Sum256([]byte("mail\x00" + tenant))
	return "m" + hex.EncodeToString(h[:8])
}

// destinations lists every destination of the configuration.
func (n *Notifier) destinations() map[string]*destination {
	out := map[string]*destination{}
	for tenant, eps := range n.endpoints {
		for _, ep := range eps {
			out["w"+ep.id] = &destination{id: "w" + ep.id, tenant: tenant, ep: ep}
		}
	}
	for scope := range n.cfg.Mail.Addresses {
		tenant := scope[:max(0, indexByte(scope, '/'))]
		out[mailDest(tenant)] = &destination{id: mailDest(tenant), tenant: tenant}
	}
	return out
}

func indexByte(s string, c byte) int {
	for i := range len(s) {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// routed is one delivery task the router queues, and its destination.
type routed struct {
	d *destination
	t natsjs.DeliveryTask
}

// route turns one event into a delivery task per destination that wants it
// and acknowledges the event at once: the event consumer never waits for a
// receiver, so its slots are never held by anyone's retries.
func (n *Notifier) route(ctx context.Context, msg natsjs.EventMsg) {
	ev, err := decodeEvent(msg.Subject(), msg.Data(), msg.MsgID())
	if err != nil {
		n.log.Error("notifier: dropping malformed event", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	// The job's trace context, as the event carries it: its tasks carry
	// it on, and the router's lines about the event name it.
	parent, state := msg.Header(tracing.HeaderParent), msg.Header(tracing.HeaderState)
	ctx = tracing.Extract(ctx, parent, state)
	var tasks []routed
	if batchID, ok := n.isBatchItem(msg); ok {
		// An item of a batch notified as one: nothing of its own; its end
		// may be the batch's (batch.go).
		if ev.Job.State.Terminal() {
			if tasks, err = n.batchTasks(ctx, ev, batchID, msg.Subject()); err != nil {
				n.log.WarnContext(ctx, "notifier: batch completion check, will retry", "event", ev.ID, "batch_id", batchID, "err", err)
				_ = msg.Nak(transientDelay)
				return
			}
		}
	} else {
		var dests []*destination
		for _, ep := range n.endpoints[ev.Tenant] {
			if ep.wants(ev.Job.State) {
				dests = append(dests, n.dests["w"+ep.id])
			}
		}
		if ev.Job.State.Terminal() && n.cfg.Mail.Addresses[ev.Tenant+"/"+ev.Requester] != "" {
			dests = append(dests, n.dests[mailDest(ev.Tenant)])
		}
		for _, d := range dests {
			if d != nil {
				tasks = append(tasks, routed{d: d, t: natsjs.DeliveryTask{
					Dest: d.id, JobID: ev.Job.ID, EventID: ev.ID, Subject: msg.Subject(), Revision: ev.Revision, Data: ev.Data,
					Trace: parent, TraceState: state,
				}})
			}
		}
	}
	for _, rt := range tasks {
		if !n.admit(ctx, rt.d, ev.Job.State.Terminal()) {
			n.overflow(ctx, rt.d, ev)
			continue
		}
		dup, err := n.queue.Enqueue(ctx, rt.t)
		if err != nil {
			// Tasks queued so far are not queued again (their message ids
			// are remembered): the event comes back and finishes the rest.
			n.log.WarnContext(ctx, "notifier: queue delivery, will retry", "event", ev.ID, "destination", rt.d.id, "err", err)
			_ = msg.Nak(transientDelay)
			return
		}
		if dup {
			n.stats.tasksDuplicate.Add(1)
		}
	}
	if err := msg.Ack(); err != nil {
		n.log.WarnContext(ctx, "notifier: ack event", "event", ev.ID, "err", err)
	}
	n.stats.events.Add(1)
}

// terminalRoom: a destination past its cap still takes terminal changes
// until it holds this many times the cap.
const terminalRoom = 2

// pendingFresh is how old a destination's pending count may be when the
// router decides whether it has room.
const pendingFresh = time.Second

// admit reports whether d has room for one more task. The count comes from
// d's consumer (all instances' tasks), read at most once per pendingFresh,
// plus what this instance queued since: several instances together may
// overshoot the cap by what they queue within that second. Past the cap
// only a job's terminal change is still queued, up to twice the cap: it is
// the notice a receiver cannot do without (how the job ended), and there
// is at most one per job, so a destination that fell behind still learns
// the end of every job while its backlog stays bounded (chaos seed
// 20261205: a notifier killed and paused for a third of a minute at a time
// let one endpoint's backlog reach the cap, and 505 jobs' ends were never
// told to it).
func (n *Notifier) admit(ctx context.Context, d *destination, terminal bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if now := time.Now(); now.Sub(d.seenAt) >= pendingFresh {
		if p, err := n.queue.Pending(ctx, d.id); err == nil {
			d.pending, d.seenAt = p, now
		}
	}
	limit := n.cfg.MaxPendingPerDestination
	if terminal {
		limit *= terminalRoom
	}
	if d.pending >= limit {
		return false
	}
	d.pending++
	return true
}

// overflow drops a task for a full destination: counted, and logged at
// most once a minute per destination.
func (n *Notifier) overflow(ctx context.Context, d *destination, ev *event) {
	if d.ep != nil {
		n.stats.webhooksDropped.Add(1)
	} else {
		n.stats.mailsDropped.Add(1)
	}
	d.mu.Lock()
	d.overflows++
	warn := time.Since(d.warnedAt) >= time.Minute
	if warn {
		d.warnedAt = time.Now()
	}
	dropped := d.overflows
	d.mu.Unlock()
	if warn {
		log := n.log.With("tenant", d.tenant, "destination", d.id, "channel", d.channel(), "event", ev.ID, "dropped_so_far", dropped,
			"max_pending", n.cfg.MaxPendingPerDestination)
		if d.ep != nil {
			log = log.With("host", d.ep.host)
		}
		log.ErrorContext(ctx, "notice dropped: the destination has too many pending deliveries")
	}
}

// watchPending refreshes every destination's pending count, for the
// metrics and so the router's view is never older than a few seconds.
func (n *Notifier) watchPending(ctx context.Context) {
	defer n.wg.Done()
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.stopping:
			// Not a delivery in flight: Stop must not wait its grace for it.
			return
		case <-t.C:
		}
		for _, d := range n.dests {
			if ctx.Err() != nil {
				return
			}
			p, err := n.queue.Pending(ctx, d.id)
			if err != nil {
				continue
			}
			d.mu.Lock()
			d.pending, d.seenAt = p, time.Now()
			d.mu.Unlock()
		}
	}
}

// pendingDeliveries is the per-destination backlog as the metrics export it.
func (n *Notifier) pendingDeliveries() []metrics.PendingDeliveries {
	n.mu.Lock()
	dests := n.dests
	n.mu.Unlock()
	out := make([]metrics.PendingDeliveries, 0, len(dests))
	for _, d := range dests {
		d.mu.Lock()
		out = append(out, metrics.PendingDeliveries{Tenant: d.tenant, Destination: d.id, Channel: d.channel(), Count: float64(d.pending)})
		d.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Destination < out[j].Destination })
	return out
}

// deliverer is one worker of one destination.
func (n *Notifier) deliverer(ctx context.Context, d *destination, feed deliveryFeed) {
	defer n.wg.Done()
	for {
		if until, ok := d.paused(n.cfg.Now()); ok {
			// Nothing is pulled while the endpoint asked for a pause: its
			// tasks wait in the queue, costing nothing.
			select {
			case <-ctx.Done():
				return
			case <-n.stopping:
				return
			case <-time.After(until.Sub(n.cfg.Now())):
			}
			continue
		}
		msg, err := feed.Next()
		if err != nil {
			if errors.Is(err, natsjs.ErrFeedStopped) {
				return
			}
			n.log.Warn("notifier: next delivery", "destination", d.id, "err", err)
			if !pause(ctx) {
				return
			}
			continue
		}
		n.deliver(ctx, d, msg)
	}
}

// deliver makes at most one attempt of one task and acknowledges it when
// it is done, or asks for it back when its next attempt is due. Waiting
// holds a slot of d's consumer only.
func (n *Notifier) deliver(ctx context.Context, d *destination, msg natsjs.DeliveryMsg) {
	t := msg.Task()
	var ev *event
	var err error
	if t.Kind == natsjs.NoticeBatch {
		ev, err = batchEvent(t)
	} else {
		ev, err = decodeEvent(t.Subject, t.Data, t.EventID)
	}
	if err != nil {
		n.log.Error("notifier: dropping malformed delivery", "destination", d.id, "subject", t.Subject, "err", err)
		_ = msg.Term()
		return
	}
	// The job's trace (the task's headers): each attempt is a span of it
	// (runWebhook, runMail), and the lines about the task name it.
	ctx = tracing.Extract(ctx, t.Trace, t.TraceState)
	stopKeepAlive := keepAlive(msg, n.cfg.AckWait/3)
	defer stopKeepAlive()

	var o outcome
	if d.ep != nil {
		if until, ok := d.paused(n.cfg.Now()); ok {
			n.stats.pausedDeliveries.Add(1)
			n.retryAt(ctx, msg, ev, until)
			return
		}
		if wait, due := n.behind(ctx, d, ev, t); wait {
			n.retryAt(ctx, msg, ev, due)
			return
		}
		body, err := ev.webhookBody()
		if err != nil {
			n.log.ErrorContext(ctx, "notifier: encode webhook body", "err", err)
			_ = msg.Term()
			return
		}
		o = n.runWebhook(ctx, d.ep, ev, body)
		if !o.pauseUntil.IsZero() && d.pause(o.pauseUntil) {
			n.log.WarnContext(ctx, "webhook endpoint asked for a pause: its deliveries wait", "tenant", d.tenant, "endpoint", d.ep.id,
				"host", d.ep.host, "until", o.pauseUntil.UTC().Format(time.RFC3339))
		}
	} else if addr := n.cfg.Mail.Addresses[ev.Tenant+"/"+ev.Requester]; addr != "" {
		o = n.runMail(ctx, ev, addr)
	} else {
		o = finished // the address was removed from the configuration
	}
	if o.done {
		if err := msg.Ack(); err != nil {
			n.log.WarnContext(ctx, "notifier: ack delivery", "event", ev.ID, "destination", d.id, "err", err)
		}
		d.mu.Lock()
		d.pending = max(d.pending-1, 0)
		d.mu.Unlock()
		d.done(ev.Job.ID, ev.Revision)
		n.stats.settled.Add(1)
		return
	}
	if d.ep != nil && o.due.After(n.cfg.Now().Add(orderWait)) {
		d.hold(ev.Job.ID, ev.Revision, o.due, n.cfg.MaxPendingPerDestination)
	}
	n.retryAt(ctx, msg, ev, o.due)
}

func (n *Notifier) retryAt(ctx context.Context, msg natsjs.DeliveryMsg, ev *event, due time.Time) {
	if err := msg.Nak(max(due.Sub(n.cfg.Now()), 0)); err != nil {
		n.log.WarnContext(ctx, "notifier: nak delivery", "event", ev.ID, "err", err)
	}
}

// orderWait is how soon a delivery held back behind an earlier one of its
// job looks again when the earlier one has no due time of its own (it is
// being attempted right now, or not yet).
const orderWait = 500 * time.Millisecond

// behind reports whether an earlier change of the same job is still
// pending at d: then this one waits until that one is due, so one
// endpoint receives one job's changes in order (by record revision).
func (n *Notifier) behind(ctx context.Context, d *destination, ev *event, t natsjs.QueuedTask) (bool, time.Time) {
	if due, ok := d.heldUntil(ev.Job.ID, ev.Revision, n.cfg.Now()); ok {
		// An earlier change waits for a retry this instance scheduled:
		// no need to ask the queue (an endpoint paused for an hour would
		// otherwise cost a few requests per later change).
		n.stats.heldForOrder.Add(1)
		return true, due
	}
	tasks, err := n.queue.JobTasks(ctx, d.id, ev.Job.ID, 64)
	if err != nil {
		n.log.WarnContext(ctx, "notifier: order check, will retry", "destination", d.id, "event", ev.ID, "err", err)
		return true, n.cfg.Now().Add(transientDelay)
	}
	for _, q := range tasks {
		if q.Seq == t.Seq || !earlier(q, t) {
			continue
		}
		due := n.cfg.Now().Add(orderWait)
		if prev, err := decodeEvent(q.Subject, q.Data, q.EventID); err == nil {
			if st, err := loadState(ctx, n.notices, prev.webhookKey(d.ep.id)); err == nil && st.NextAt.After(due) {
				due = st.NextAt
			}
		}
		n.stats.heldForOrder.Add(1)
		return true, due
	}
	return false, time.Time{}
}

// earlier: q is a change of the job before t (by revision, or by queue
// order where a revision is missing). A job admitted again under its key
// after its record expired shares the id and has later revisions, so its
// changes follow the old job's, which is the order they happened in.
func earlier(q, t natsjs.QueuedTask) bool {
	if q.Revision > 0 && t.Revision > 0 {
		return q.Revision < t.Revision
	}
	return q.Seq < t.Seq
}

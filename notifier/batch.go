package notifier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/wneessen/go-mail"
)

// A batch's end is one notice (docs/api.md, "Batches"): the events of the
// items of a batch whose choice is "batch" (the default; the event's
// natsjs.HeaderBatch, written from the item's record) queue nothing of
// their own. On such an item's terminal event the router reads the batch's
// record and its items' records; once every one has ended it queues one
// task per destination (each of the tenant's endpoints that wants a
// terminal state, and the requester's mail) under an id derived from the
// batch alone. Whichever item's event sees the batch done (the last one to
// end always does: its record was written before its event), on whichever
// instance and however often it is redelivered, queues the same tasks: the
// deliveries stream keeps one per message id, and the webhook's delivery
// state and the mail's create-only claim, both keyed by the batch, keep a
// copy queued after the duplicate window from sending again. Completion is
// read from the stored records only, never from what an event says.

// jobReader reads job records (natsjs.Store).
type jobReader interface {
	Get(ctx context.Context, key string) (*job.Record, error)
}

// batchReader reads batch records (natsjs.BatchStore).
type batchReader interface {
	Get(ctx context.Context, key string) (*job.BatchRecord, error)
}

// batchNotice is the data of a batch.completed webhook and what the
// batch's mail lists.
type batchNotice struct {
	ID         string      `json:"id"`
	CreatedAt  time.Time   `json:"created_at"`
	FinishedAt time.Time   `json:"finished_at"`
	Total      int         `json:"total"`
	Counts     batchCounts `json:"counts"`
	Jobs       []batchJob  `json:"jobs"`

	// trace and traceState: the first item's trace context (not sent).
	trace, traceState string
}

type batchCounts struct {
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Canceled  int `json:"canceled"`
}

type batchJob struct {
	ID    string    `json:"id"`
	State job.State `json:"state"`
}

// batchTask is the Data of a batch notice's delivery task.
type batchTask struct {
	Tenant    string      `json:"tenant"`
	Requester string      `json:"requester"`
	Notice    batchNotice `json:"notice"`
}

// batchEventID is the webhook-id of a batch's notice: the batch and its
// created_at (a batch admitted again under its key after its record
// expired has the same id, and is another batch).
func batchEventID(id string, created time.Time) string {
	return id + ".completed." + strconv.FormatInt(created.UnixMilli(), 10)
}

// batchState is the stand-in state of a batch notice in keys and logs.
const batchState job.State = "completed"

// batchEvent turns a batch task back into the event the deliverers handle:
// its Job names the batch (id, created_at, state "completed"), so the
// delivery-state and mail-claim keys are the batch's.
func batchEvent(t natsjs.QueuedTask) (*event, error) {
	var bt batchTask
	if err := json.Unmarshal(t.Data, &bt); err != nil {
		return nil, fmt.Errorf("%w: batch notice: %w", errBadEvent, err)
	}
	if !job.ValidBatchID(bt.Notice.ID) || bt.Tenant == "" || bt.Requester == "" || len(bt.Notice.Jobs) > job.MaxBatchItems {
		return nil, fmt.Errorf("%w: batch notice %q", errBadEvent, bt.Notice.ID)
	}
	data, err := json.Marshal(bt.Notice)
	if err != nil {
		return nil, err
	}
	return &event{ID: t.EventID, Tenant: bt.Tenant, Requester: bt.Requester, Data: data, batch: &bt.Notice,
		Job: &job.Resource{ID: bt.Notice.ID, State: batchState, CreatedAt: bt.Notice.CreatedAt, UpdatedAt: bt.Notice.FinishedAt}}, nil
}

// isBatchItem reports whether msg is the event of an item of a batch
// notified as one.
func (n *Notifier) isBatchItem(msg natsjs.EventMsg) (string, bool) {
	id := msg.Header(natsjs.HeaderBatch)
	if id == "" || msg.Header(natsjs.HeaderBatchNotify) == job.NotifyEach {
		return "", false
	}
	return id, job.ValidBatchID(id)
}

// wantsBatch: an endpoint gets a batch's notice when it wants any terminal
// state (a batch ends when its jobs have).
func (ep *endpoint) wantsBatch() bool {
	return ep.states == nil || ep.states[job.StateSucceeded] || ep.states[job.StateFailed] || ep.states[job.StateCanceled]
}

// batchTasks returns the batch notice's tasks once every item of the
// event's batch has ended, else none. An error is transient: the event is
// tried again.
func (n *Notifier) batchTasks(ctx context.Context, ev *event, batchID, subject string) ([]routed, error) {
	var dests []*destination
	for _, ep := range n.endpoints[ev.Tenant] {
		if ep.wantsBatch() {
			dests = append(dests, n.dests["w"+ep.id])
		}
	}
	if n.cfg.Mail.Addresses[ev.Tenant+"/"+ev.Requester] != "" {
		dests = append(dests, n.dests[mailDest(ev.Tenant)])
	}
	dests = slices.DeleteFunc(dests, func(d *destination) bool { return d == nil })
	if len(dests) == 0 {
		return nil, nil // nobody to tell: nothing to read
	}
	cb, err := n.batchItems(ctx, ev, batchID)
	if err != nil || cb.items == nil {
		return nil, err
	}
	items, created := cb.items, cb.created
	notice, err := n.readEnded(ctx, ev, batchID, created, items)
	if err != nil || notice == nil {
		return nil, err
	}
	// The notice is traced as its batch's admission, or (a batch stored
	// without one) as its first job.
	parent, state := cb.trace, cb.traceState
	if parent == "" {
		parent, state = notice.trace, notice.traceState
	}
	data, err := json.Marshal(batchTask{Tenant: ev.Tenant, Requester: ev.Requester, Notice: *notice})
	if err != nil {
		return nil, err
	}
	eventID := batchEventID(batchID, created)
	out := make([]routed, 0, len(dests))
	for _, d := range dests {
		out = append(out, routed{d: d, t: natsjs.DeliveryTask{Dest: d.id, JobID: batchID, EventID: eventID, Subject: subject, Data: data, Kind: natsjs.NoticeBatch,
			Trace: parent, TraceState: state}})
	}
	return out, nil
}

// batchItems returns the item job ids, created_at and trace context of
// the event's batch (from the cache, else its record), or no items when
// the event's job is not an item of a stored batch.
func (n *Notifier) batchItems(ctx context.Context, ev *event, batchID string) (cachedBatch, error) {
	key := job.StoreKey(ev.Tenant, ev.Requester, batchID)
	if c, ok := n.batchCache.get(key); ok && c.created.Equal(ev.Job.CreatedAt) {
		return c, nil
	}
	b, err := n.batches.Get(ctx, key)
	if errors.Is(err, job.ErrNotFound) {
		n.log.WarnContext(ctx, "notifier: the batch of an item's event is not stored; no batch notice", "batch_id", batchID, "job", ev.Job.ID)
		return cachedBatch{}, nil
	}
	if err != nil {
		return cachedBatch{}, err
	}
	items := make([]string, len(b.Items))
	for i, it := range b.Items {
		items[i] = it.JobID
	}
	if !slices.Contains(items, ev.Job.ID) {
		n.log.WarnContext(ctx, "notifier: an event names a batch its job is not an item of; no batch notice", "batch_id", batchID, "job", ev.Job.ID)
		return cachedBatch{}, nil
	}
	c := cachedBatch{items: items, created: b.CreatedAt, trace: b.Trace, traceState: b.TraceState}
	n.batchCache.put(key, c)
	return c, nil
}

// batchReads is how many item records one completion check reads at once.
const batchReads = 16

// readEnded reads the items' records, starting after the event's own job
// (the items after it are the likelier to run still) and stopping at the
// first chunk holding one that has not ended: nil then. Once all have
// ended it returns the notice, built from the records alone.
func (n *Notifier) readEnded(ctx context.Context, ev *event, batchID string, created time.Time, items []string) (*batchNotice, error) {
	start := (slices.Index(items, ev.Job.ID) + 1) % len(items)
	recs := make([]*job.Record, len(items))
	for off := 0; off < len(items); off += batchReads {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			first   error
			pending bool
		)
		for k := off; k < min(off+batchReads, len(items)); k++ {
			i := (start + k) % len(items)
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := n.jobs.Get(ctx, job.StoreKey(ev.Tenant, ev.Requester, items[i]))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, job.ErrNotFound):
					pending = true // still being admitted
				case err != nil:
					if first == nil {
						first = err
					}
				case !r.State.Terminal():
					pending = true
				default:
					recs[i] = r
				}
			}()
		}
		wg.Wait()
		if first != nil {
			return nil, fmt.Errorf("batch %s: %w", batchID, first)
		}
		if pending {
			return nil, nil
		}
	}
	notice := &batchNotice{ID: batchID, CreatedAt: created, Total: len(items), Jobs: make([]batchJob, len(items)),
		trace: recs[0].Trace, traceState: recs[0].TraceState}
	for i, r := range recs {
		notice.Jobs[i] = batchJob{ID: r.ID, State: r.State}
		switch r.State {
		case job.StateSucceeded:
			notice.Counts.Succeeded++
		case job.StateFailed:
			notice.Counts.Failed++
		case job.StateCanceled:
			notice.Counts.Canceled++
		}
		// The latest end: the same for every copy of the notice.
		if r.FinishedAt != nil && r.FinishedAt.After(notice.FinishedAt) {
			notice.FinishedAt = r.FinishedAt.UTC()
		} else if r.FinishedAt == nil && r.UpdatedAt.After(notice.FinishedAt) {
			notice.FinishedAt = r.UpdatedAt.UTC()
		}
	}
	return notice, nil
}

// batchCacheSize bounds the batches whose item ids an instance keeps: a
// batch's items never change, and reading its record (up to 4 MiB) on each
// of its items' ends would cost far more than the item reads.
const batchCacheSize = 256

type cachedBatch struct {
	items             []string
	created           time.Time
	trace, traceState string // the batch admission's trace context
}

type batchCache struct {
	mu sync.Mutex
	m  map[string]cachedBatch
}

func (c *batchCache) get(key string) (cachedBatch, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

func (c *batchCache) put(key string, v cachedBatch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cachedBatch{}
	}
	if _, ok := c.m[key]; !ok && len(c.m) >= batchCacheSize {
		for k := range c.m { // any one: a miss costs one record read
			delete(c.m, k)
			break
		}
	}
	c.m[key] = v
}

// buildBatchMail writes a batch's one mail: its counts and every item with
// its state and the link a job's own mail would give (jobPage).
func (n *Notifier) buildBatchMail(ev *event, addr string) (*mail.Msg, string, error) {
	bn := ev.batch
	m := mail.NewMsg()
	if err := m.From(n.cfg.Mail.From); err != nil {
		return nil, "", fmt.Errorf("mail from: %w", err)
	}
	if err := m.To(addr); err != nil {
		return nil, "", fmt.Errorf("mail to: %w", err)
	}
	id := plain(bn.ID, 64)
	counts := fmt.Sprintf("%d succeeded, %d failed, %d canceled", bn.Counts.Succeeded, bn.Counts.Failed, bn.Counts.Canceled)
	m.Subject(fmt.Sprintf("Your batch %s of %d jobs has finished: %s", id, bn.Total, counts))
	m.SetMessageIDWithValue(bn.ID + ".completed@jobgate")
	m.SetDateWithValue(n.cfg.Now())
	m.SetGenHeader("Auto-Submitted", "auto-generated")
	m.SetGenHeader("X-Jobgate-Event", ev.ID)
	var b strings.Builder
	fmt.Fprintf(&b, "Every job of your batch %s has finished: %s.\n\n", id, counts)
	fmt.Fprintf(&b, "Submitted:  %s\n", bn.CreatedAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "Finished:   %s\n\n", bn.FinishedAt.UTC().Format(time.RFC3339))
	for _, j := range bn.Jobs {
		what := "Details: "
		if j.State == job.StateSucceeded {
			what = "Download:"
		}
		fmt.Fprintf(&b, "%-30s %-9s  %s %s\n", plain(j.ID, 64), plain(string(j.State), 16), what, n.jobPage(j.ID))
	}
	b.WriteString("\nEach link opens the reviewer's page: sign in as usual to see the job (and download its result).\n")
	b.WriteString("This notice is sent once per batch.\n")
	m.SetBodyString(mail.TypeTextPlain, b.String())
	name := ev.Tenant + "." + ev.Requester + "." + keyToken(bn.ID) + ".completed.eml"
	return m, name, nil
}

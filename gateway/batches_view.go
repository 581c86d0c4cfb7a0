package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/job"
)

// A batch's counts are counted from its items' records, not kept apart
// (docs/api.md, "Batches"): a read of a batch reads its items, at most
// job.MaxBatchItems, 16 at a time, and a long-poll or event stream reads
// them once and then follows the gateway's one change feed. Nothing is
// written per job change to keep a count, and no count can drift from the
// records it counts.

// batchView is what a batch looks like now: the state and revision of
// each item, as read (an item whose record does not exist yet, still being
// admitted, counts as admission makes it: queued, or scheduled with a
// run_at ahead).
type batchView struct {
	b      *job.BatchRecord
	states []job.State
	revs   []uint64
	index  map[string]int // store key → item, for changes (watches only)
}

func newBatchView(b *job.BatchRecord) *batchView {
	v := &batchView{b: b, states: make([]job.State, len(b.Items)), revs: make([]uint64, len(b.Items))}
	for i, it := range b.Items {
		v.states[i] = job.StateQueued
		if it.RunAt != nil && it.RunAt.After(b.CreatedAt) {
			v.states[i] = job.StateScheduled // as ItemRecord admits it
		}
	}
	return v
}

// readBatchView reads every item's record.
func (g *Gateway) readBatchView(ctx context.Context, b *job.BatchRecord) (*batchView, error) {
	v := newBatchView(b)
	err := forEachItem(ctx, len(b.Items), func(ctx context.Context, i int) error {
		rec, err := g.jobs.Get(ctx, job.StoreKey(b.Tenant, b.Requester, b.Items[i].JobID))
		if errors.Is(err, job.ErrNotFound) {
			return nil // not admitted yet: as admission makes it
		}
		if err != nil {
			return err
		}
		v.states[i], v.revs[i] = rec.State, rec.Revision
		return nil
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// itemReads is how many item records one batch read has in flight.
const itemReads = 16

// forEachItem runs fn for items 0..n-1, itemReads at a time; the first
// error stops the rest and is returned.
func forEachItem(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for range min(itemReads, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel()
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = errors.Join(job.ErrUnavailable, ctx.Err())
	}
	return first
}

// rank orders states by how far a job got: states only move forward.
func rank(s job.State) uint64 {
	switch {
	case s.Terminal():
		return 2
	case s == job.StateRunning:
		return 1
	}
	return 0
}

// apply takes a changed item record; it reports whether the view changed
// (a state moved forward, scheduled to queued included, which leaves the
// version as it is: an older change, or a progress step, does not).
func (v *batchView) apply(rec *job.Record) bool {
	i, ok := v.index[rec.Key()]
	if !ok || rec.Revision <= v.revs[i] {
		return false
	}
	v.revs[i] = rec.Revision
	woken := v.states[i] == job.StateScheduled && rec.State == job.StateQueued
	if rank(rec.State) <= rank(v.states[i]) && !woken {
		return false
	}
	v.states[i] = rec.State
	return true
}

// version counts the steps the items took (queued 0, running 1, terminal
// 2 each): it grows with every change of the batch, and is 2×total once
// the batch is done. It is the batch's event id.
func (v *batchView) version() uint64 {
	var n uint64
	for _, s := range v.states {
		n += rank(s)
	}
	return n
}

func (v *batchView) done() bool { return v.version() == 2*uint64(len(v.states)) }

// etag names the view: its version and a digest of every item's state, so
// two gateways that see the same states answer the same tag.
func (v *batchView) etag() string {
	h := sha256.New()
	for _, s := range v.states {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return `"b` + strconv.FormatUint(v.version(), 10) + "-" + hex.EncodeToString(h.Sum(nil)[:6]) + `"`
}

// batchCounts are a batch's items per state.
type batchCounts struct {
	Scheduled int `json:"scheduled"`
	Queued    int `json:"queued"`
	Running   int `json:"running"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Canceled  int `json:"canceled"`
}

type batchJob struct {
	ID    string    `json:"id"`
	State job.State `json:"state"`
}

type batchLinks struct {
	Self   string `json:"self"`
	Events string `json:"events"`
}

// batchResource is the public view of a batch (openapi.yaml, Batch).
type batchResource struct {
	ID         string       `json:"id"`
	CreatedAt  time.Time    `json:"created_at"`
	Done       bool         `json:"done"`
	Total      int          `json:"total"`
	Notify     string       `json:"notify"`
	Counts     batchCounts  `json:"counts"`
	Progress   job.Progress `json:"progress"`
	Jobs       []batchJob   `json:"jobs,omitempty"`
	NextCursor string       `json:"next_cursor,omitempty"`
	Links      batchLinks   `json:"links"`
}

// resource renders the view with the jobs offset..offset+limit (none when
// limit is 0).
func (v *batchView) resource(offset, limit int) *batchResource {
	r := &batchResource{ID: v.b.ID, CreatedAt: v.b.CreatedAt, Total: len(v.states), Done: v.done(), Notify: job.NotifyBatch,
		Links: batchLinks{Self: job.BatchPath(v.b.ID), Events: job.BatchPath(v.b.ID) + "/events"}}
	if v.b.Notify != "" {
		r.Notify = v.b.Notify
	}
	for _, s := range v.states {
		switch s {
		case job.StateScheduled:
			r.Counts.Scheduled++
		case job.StateQueued:
			r.Counts.Queued++
		case job.StateRunning:
			r.Counts.Running++
		case job.StateSucceeded:
			r.Counts.Succeeded++
		case job.StateFailed:
			r.Counts.Failed++
		case job.StateCanceled:
			r.Counts.Canceled++
		}
	}
	r.Progress = job.Progress{Done: r.Counts.Succeeded + r.Counts.Failed + r.Counts.Canceled, Total: r.Total, Unit: "items"}
	end := min(offset+limit, len(v.states))
	for i := offset; i < end; i++ {
		r.Jobs = append(r.Jobs, batchJob{ID: v.b.Items[i].JobID, State: v.states[i]})
	}
	if limit > 0 && end < len(v.states) {
		r.NextCursor = strconv.Itoa(end)
	}
	return r
}

// writeBatch renders the batch resource with its caching headers.
func (g *Gateway) writeBatch(c *fiber.Ctx, status int, v *batchView, offset, limit int) error {
	c.Set(fiber.HeaderETag, v.etag())
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	if !v.done() {
		setRetryAfter(c, batchRetryAfter(v.b, g.cfg.Now()))
	}
	body, err := jsonMarshal(v.resource(offset, limit))
	if err != nil {
		return writeProblem(c, err)
	}
	c.Status(status)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body)
}

// The page of jobs a batch read lists: ?limit= (1 to 1,000, default 100)
// from ?cursor= (a next_cursor a read answered).
const defaultBatchPage = 100

func batchPage(c *fiber.Ctx, n int) (offset, limit int, err error) {
	limit = defaultBatchPage
	if s := c.Query("limit"); s != "" {
		l, err := strconv.Atoi(s)
		if err != nil || l < 1 || l > job.MaxBatchItems {
			return 0, 0, job.Userf(errBadQuery, "limit must be an integer from 1 to %d", job.MaxBatchItems)
		}
		limit = l
	}
	if s := c.Query("cursor"); s != "" {
		o, err := strconv.Atoi(s)
		if err != nil || o < 0 || o > n || len(s) > 4 {
			return 0, 0, job.Userf(errBadQuery, "cursor must be a next_cursor this batch's reads answered")
		}
		offset = o
	}
	return offset, limit, nil
}

// batchWatch follows the changes of a batch's items through the gateway's
// change feed: one registration per item, each keeping its newest change,
// so no item's last change is lost however many change at once.
type batchWatch struct {
	g     *Gateway
	keys  []string
	chans []chan *job.Record
	cases []reflect.SelectCase
}

func (g *Gateway) watchBatch(b *job.BatchRecord) (*batchWatch, error) {
	w := &batchWatch{g: g}
	for _, it := range b.Items {
		key := job.StoreKey(b.Tenant, b.Requester, it.JobID)
		ch, err := g.changes.watch(key)
		if err != nil {
			w.stop()
			return nil, errors.Join(job.ErrUnavailable, err)
		}
		w.keys, w.chans = append(w.keys, key), append(w.chans, ch)
		w.cases = append(w.cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	return w, nil
}

// next waits for the next change of an item; false when ctx, timeout or
// stopped ended the wait first (timeout may be nil: no timeout).
func (w *batchWatch) next(ctx context.Context, timeout <-chan time.Time, stopped <-chan struct{}) (*job.Record, bool) {
	cases := append(w.cases[:len(w.cases):len(w.cases)],
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(stopped)})
	if timeout != nil {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timeout)})
	}
	chosen, val, ok := reflect.Select(cases)
	if chosen >= len(w.chans) || !ok {
		return nil, false
	}
	return val.Interface().(*job.Record), true
}

func (w *batchWatch) stop() {
	for i, ch := range w.chans {
		w.g.changes.unwatch(w.keys[i], ch)
	}
}

// indexed returns v with the map from item keys to items that apply needs.
func (v *batchView) indexed() *batchView {
	v.index = make(map[string]int, len(v.b.Items))
	for i, it := range v.b.Items {
		v.index[job.StoreKey(v.b.Tenant, v.b.Requester, it.JobID)] = i
	}
	return v
}

package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/jobgate/jobgate/internal/retry"
	"github.com/jobgate/jobgate/internal/sse"
	"github.com/jobgate/jobgate/pkg/api"
)

// batchesPath is where batches are submitted; a journal entry with this
// Path is a batch.
const batchesPath = "/v1/batches"

func batchPath(id string) string { return batchesPath + "/" + url.PathEscape(id) }

// WithNotify sets a SubmitBatch's notice choice: api.NotifyBatch (the
// default: one webhook and at most one mail once every job has ended) or
// api.NotifyEach (every job notified as any job is).
func WithNotify(mode string) SubmitOption { return func(o *submitOptions) { o.notify = mode } }

// SubmitBatch asks for up to api.MaxBatchItems jobs under one idempotency
// key, admitted together exactly once. The key is chosen and journaled as
// Submit's is (WithKey, WithFreshKey, an unfinished identical batch in the
// journal, else a new one); every retry, and a Resume after a crash, reuses
// it. The Submission's Batch lists every job. Errors are Submit's: a 422
// *ValidationError names fields as /jobs/3/params/pages.
func (c *Client) SubmitBatch(ctx context.Context, items []api.BatchItem, opts ...SubmitOption) (*Submission, error) {
	var o submitOptions
	for _, f := range opts {
		f(&o)
	}
	if o.key != "" && !api.ValidKey(o.key) {
		return nil, fmt.Errorf("%w: must be 1-255 printable ASCII characters", api.ErrKeyInvalid)
	}
	if len(items) == 0 || len(items) > api.MaxBatchItems {
		return nil, fmt.Errorf("a batch holds 1 to %d jobs, not %d", api.MaxBatchItems, len(items))
	}
	if o.notify != "" && o.notify != api.NotifyBatch && o.notify != api.NotifyEach {
		return nil, fmt.Errorf("notify must be %q or %q", api.NotifyBatch, api.NotifyEach)
	}
	req := api.BatchRequest{Jobs: make([]api.BatchItem, len(items)), Notify: o.notify}
	for i, it := range items {
		if len(it.Params) == 0 {
			it.Params = json.RawMessage(`{}`)
		}
		req.Jobs[i] = it
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	now := c.clock.Now().UTC()
	e := &Entry{
		Key: o.key, Scope: c.scope, Type: "batch of " + strconv.Itoa(len(items)), Path: batchesPath, Body: body,
		Fingerprint: Fingerprint(body), State: EntryPending, CreatedAt: now, UpdatedAt: now,
	}
	if e.Key == "" {
		e.Key = NewKey()
	}
	reused := false
	if c.journal != nil {
		if e, reused, err = c.journal.claim(e, o.key != "", o.fresh); err != nil {
			return nil, err
		}
	}
	if reused {
		c.log.Info("resuming unfinished batch submission", "key_hash", keyTag(e.Key), "batch_id", e.JobID, "since", e.CreatedAt)
	}
	return c.post(ctx, e, reused)
}

// decodeBatch reads a batch resource from a buffered response.
func decodeBatch(resp *http.Response) (*api.Batch, error) {
	defer resp.Body.Close()
	var b api.Batch
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		return nil, fmt.Errorf("%w: batch resource: %v", ErrUnexpectedResponse, err)
	}
	if b.ID == "" || b.Total < 1 {
		return nil, fmt.Errorf("%w: batch resource without id or jobs", ErrUnexpectedResponse)
	}
	return &b, nil
}

// BatchSnapshot is one read of a batch with its validators.
type BatchSnapshot struct {
	Batch       *api.Batch // nil when NotModified
	ETag        string
	NotModified bool
	RetryAfter  time.Duration
}

// GetBatch reads a batch with every one of its jobs. Another requester's
// batch, like a missing one, is a *ProblemError matching api.ErrNotFound.
func (c *Client) GetBatch(ctx context.Context, id string) (*api.Batch, error) {
	s, err := c.GetBatchIfChanged(ctx, id, "", 0)
	if err != nil {
		return nil, err
	}
	return s.Batch, nil
}

// GetBatchIfChanged reads a batch (every job) unless it still has etag;
// with wait > 0 and an etag the server long-polls (at most 30 s).
func (c *Client) GetBatchIfChanged(ctx context.Context, id, etag string, wait time.Duration) (*BatchSnapshot, error) {
	r := &request{method: http.MethodGet, path: batchPath(id), header: http.Header{},
		query: url.Values{"limit": {strconv.Itoa(api.MaxBatchItems)}}}
	if etag != "" {
		r.header.Set("If-None-Match", etag)
		if wait > 0 {
			r.query.Set("wait", wait.String())
			r.extra = wait
		}
	}
	resp, _, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	s := &BatchSnapshot{ETag: resp.Header.Get("ETag"), RetryAfter: retry.After(resp.Header, c.clock.Now())}
	switch resp.StatusCode {
	case http.StatusNotModified:
		resp.Body.Close()
		s.NotModified = true
		return s, nil
	case http.StatusOK:
		if s.Batch, err = decodeBatch(resp); err != nil {
			return nil, err
		}
		c.observeBatch(s.Batch)
		return s, nil
	}
	return nil, c.unexpected(resp)
}

// observeBatch tells the journal a batch was seen done.
func (c *Client) observeBatch(b *api.Batch) {
	if c.journal == nil || b == nil || !b.Done {
		return
	}
	if err := c.journal.observeID(b.ID, ""); err != nil {
		c.log.Warn("journal not updated", "batch_id", b.ID, "err", err)
	}
}

// WaitBatch follows a batch until every job of it has ended and returns it
// with every job. onUpdate, if not nil, gets each new version (without
// jobs, as events carry it). It follows the batch's event stream,
// reconnecting with Last-Event-ID, and long-polls when the stream is not
// offered or keeps breaking.
func (c *Client) WaitBatch(ctx context.Context, id string, onUpdate func(*api.Batch)) (*api.Batch, error) {
	w := &batchWaiter{c: c, id: id, onUpdate: onUpdate}
	for failures := 0; failures < sseMaxFailures; {
		done, err := w.stream(ctx)
		if done {
			return c.GetBatch(ctx, id)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("wait for %s: %w", id, context.Cause(ctx))
		}
		var p *ProblemError
		switch {
		case errors.Is(err, errNoSSE):
			return w.poll(ctx)
		case errors.As(err, &p) && (p.Status == http.StatusUnauthorized || p.Status == http.StatusForbidden || p.Status == http.StatusNotFound):
			return nil, err
		}
		if err == nil {
			failures = 0
		}
		failures++
		var ra time.Duration
		if p != nil {
			ra = p.RetryAfter
		}
		c.log.Debug("batch event stream ended early, reconnecting", "batch_id", id, "err", err)
		if err := c.clock.Sleep(ctx, c.retry.Backoff(failures-1, ra)); err != nil {
			return nil, fmt.Errorf("wait for %s: %w", id, context.Cause(ctx))
		}
	}
	c.log.Info("batch event stream keeps breaking, polling instead", "batch_id", id)
	return w.poll(ctx)
}

type batchWaiter struct {
	c        *Client
	id       string
	onUpdate func(*api.Batch)
	eventID  string
	last     string
}

func (w *batchWaiter) deliver(b *api.Batch) {
	v := fmt.Sprintf("%+v", b.Counts)
	if v != w.last {
		w.last = v
		if w.onUpdate != nil {
			w.onUpdate(b)
		}
	}
}

// stream follows the batch's events; true once one said done (or the
// server answered 204: done, and its last event was ours).
func (w *batchWaiter) stream(ctx context.Context) (bool, error) {
	resp, err := w.c.openStream(ctx, batchPath(w.id)+"/events", w.eventID)
	if errors.Is(err, errStreamOver) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	idle := time.AfterFunc(sseIdle, func() { resp.Body.Close() })
	defer idle.Stop()
	done, got := false, false
	err = sse.Read(resp.Body, func() { idle.Reset(sseIdle) }, func(ev sse.Event) (bool, error) {
		if ev.Name != "batch" {
			return false, nil
		}
		var b api.Batch
		if err := json.Unmarshal(ev.Data, &b); err != nil || b.ID == "" {
			return true, fmt.Errorf("%w: event data is not a batch resource", ErrUnexpectedResponse)
		}
		if ev.ID != "" {
			w.eventID = ev.ID
		}
		got = true
		w.deliver(&b)
		done = b.Done
		return done, nil
	})
	if done {
		return true, nil
	}
	if err == nil && !got {
		err = io.ErrUnexpectedEOF
	}
	return false, err
}

// poll long-polls the batch with its ETag until it is done.
func (w *batchWaiter) poll(ctx context.Context) (*api.Batch, error) {
	etag, interval := "", defaultPoll
	for {
		start := w.c.clock.Now()
		s, err := w.c.GetBatchIfChanged(ctx, w.id, etag, longPoll)
		if err != nil {
			return nil, fmt.Errorf("wait for %s: %w", w.id, err)
		}
		if !s.NotModified {
			w.deliver(s.Batch)
			if s.Batch.Done {
				return s.Batch, nil
			}
		}
		if s.ETag != "" {
			etag = s.ETag
		}
		if s.RetryAfter > 0 {
			interval = s.RetryAfter
		}
		if d := start.Add(interval).Sub(w.c.clock.Now()); d > 0 {
			if err := w.c.clock.Sleep(ctx, d); err != nil {
				return nil, fmt.Errorf("wait for %s: %w", w.id, context.Cause(ctx))
			}
		}
	}
}

// Event is one change of one of the requester's jobs on GET /v1/events.
type Event struct {
	// ID is the event's id: pass the last one handled to Events to resume
	// right after it.
	ID  string
	Job *api.Resource
}

// Events follows every change of the requester's jobs (GET /v1/events,
// one stream however many jobs) and calls fn for each, in order (the
// stream's batch events are left out: WaitBatch follows a batch). after is
// the ID of the last event already handled ("" = from now on). A dropped
// connection is reopened with Last-Event-ID set to the last event fn was
// given, so nothing is missed or repeated. It returns when ctx ends (nil),
// fn returns an error (that error), or the server refuses the stream.
func (c *Client) Events(ctx context.Context, after string, fn func(Event) error) error {
	last := after
	for failures := 0; ; {
		got, err := c.eventsOnce(ctx, &last, fn)
		if ctx.Err() != nil {
			return nil
		}
		var stop stopErr
		if errors.As(err, &stop) {
			return stop.err
		}
		var p *ProblemError
		if errors.As(err, &p) && p.Status >= 400 && p.Status < 500 && p.Status != http.StatusTooManyRequests {
			return err
		}
		if got {
			failures = 0
		}
		var ra time.Duration
		if p != nil {
			ra = p.RetryAfter
		}
		c.log.Debug("event stream dropped, resuming", "last_event_id", last, "err", err)
		if err := c.clock.Sleep(ctx, c.retry.Backoff(failures, ra)); err != nil {
			return nil
		}
		failures++
	}
}

// stopErr carries fn's error out of the stream.
type stopErr struct{ err error }

func (s stopErr) Error() string { return s.err.Error() }

func (c *Client) eventsOnce(ctx context.Context, last *string, fn func(Event) error) (bool, error) {
	hdr := http.Header{"Accept": {"text/event-stream"}}
	if *last != "" {
		hdr.Set("Last-Event-ID", *last)
	}
	resp, _, err := c.send(ctx, &request{method: http.MethodGet, path: "/v1/events", header: hdr, stream: true})
	if err != nil {
		return false, err
	}
	if resp.StatusCode != http.StatusOK {
		return false, c.unexpected(resp)
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return false, fmt.Errorf("%w: not an event stream", ErrUnexpectedResponse)
	}
	stopWatch := context.AfterFunc(ctx, func() { resp.Body.Close() })
	defer stopWatch()
	idle := time.AfterFunc(sseIdle, func() { resp.Body.Close() })
	defer idle.Stop()
	got := false
	err = sse.Read(resp.Body, func() { idle.Reset(sseIdle) }, func(ev sse.Event) (bool, error) {
		if ev.Name != "job" {
			return false, nil
		}
		var res api.Resource
		if err := json.Unmarshal(ev.Data, &res); err != nil || res.ID == "" {
			return true, fmt.Errorf("%w: event data is not a job resource", ErrUnexpectedResponse)
		}
		got = true
		if err := fn(Event{ID: ev.ID, Job: &res}); err != nil {
			return true, stopErr{err}
		}
		if ev.ID != "" {
			*last = ev.ID
		}
		return false, nil
	})
	if err == nil {
		err = io.ErrUnexpectedEOF // the stream never ends by itself
	}
	return got, err
}

package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jobgate/jobgate/internal/sse"
	"github.com/jobgate/jobgate/pkg/api"
)

var (
	// errNoSSE means the server does not offer the job's event stream.
	errNoSSE = errors.New("event stream not offered")
	// errResync means a quiet stream was closed to reconnect.
	errResync = errors.New("event stream quiet, reconnecting")
)

const (
	// longPoll is how long one polling request may wait for a change.
	longPoll = 20 * time.Second
	// sseIdle is how long an event stream may stay silent (the gateway
	// sends a keep-alive every 15s) before it is considered dead.
	sseIdle = 45 * time.Second
	// sseResync is how long a stream may go without a job event before
	// Wait reconnects (with Last-Event-ID, so nothing is repeated) to check
	// it did not miss one. Streams are cheap; a lost change is not.
	sseResync = 30 * time.Second
	// sseMaxFailures is how many broken streams in a row make Wait switch
	// to polling for good.
	sseMaxFailures = 3
	// defaultPoll paces polls when the server suggests nothing.
	defaultPoll = time.Second
)

// Wait follows a job until it is terminal and returns it. onUpdate, if not
// nil, gets every new version as it is seen (state, attempt or progress
// changed). Wait follows the job's Server-Sent Events when the gateway offers
// them and otherwise long-polls with If-None-Match, never faster than the
// server's Retry-After.
func (c *Client) Wait(ctx context.Context, id string, onUpdate func(*api.Resource)) (*api.Resource, error) {
	w := &waiter{c: c, id: id, onUpdate: onUpdate}
	res, err := w.run(ctx)
	if err != nil {
		return nil, err
	}
	c.observe(res)
	return res, nil
}

type waiter struct {
	c        *Client
	id       string
	onUpdate func(*api.Resource)
	last     string // identity of the last delivered version
	eventID  string // Last-Event-ID for reconnects
}

// deliver hands a version to onUpdate unless it was already delivered, and
// reports whether it is terminal.
func (w *waiter) deliver(res *api.Resource) bool {
	v := fmt.Sprintf("%s|%d|%d", res.State, res.Attempt, res.UpdatedAt.UnixNano())
	if res.Progress != nil {
		v += fmt.Sprintf("|%d/%d", res.Progress.Done, res.Progress.Total)
	}
	if v != w.last {
		w.last = v
		if w.onUpdate != nil {
			w.onUpdate(res)
		}
	}
	return res.State.Terminal()
}

func (w *waiter) run(ctx context.Context) (*api.Resource, error) {
	for failures := 0; failures < sseMaxFailures; {
		res, err := w.stream(ctx)
		if res != nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("wait for %s: %w", w.id, context.Cause(ctx))
		}
		var p *ProblemError
		switch {
		case errors.Is(err, errResync):
			failures = 0
			continue
		case errors.Is(err, errNoSSE):
			return w.poll(ctx)
		case errors.As(err, &p) && (p.Status == http.StatusUnauthorized || p.Status == http.StatusForbidden):
			return nil, err
		case errors.As(err, &p) && p.Status == http.StatusNotFound:
			// No such job, or no such route: polling tells which.
			return w.poll(ctx)
		}
		if err == nil {
			failures = 0 // the stream delivered something before it ended
		}
		failures++
		var ra time.Duration
		if p != nil {
			ra = p.RetryAfter
		}
		w.c.log.Debug("event stream ended early, reconnecting", "job_id", w.id, "err", err)
		if err := w.c.clock.Sleep(ctx, w.c.retry.Backoff(failures-1, ra)); err != nil {
			return nil, fmt.Errorf("wait for %s: %w", w.id, context.Cause(ctx))
		}
	}
	w.c.log.Info("event stream keeps breaking, polling instead", "job_id", w.id)
	return w.poll(ctx)
}

// stream follows the job's event stream until a terminal version (returned),
// or the stream ends or breaks (error; nil error if it ended cleanly after
// delivering at least one event).
func (w *waiter) stream(ctx context.Context) (*api.Resource, error) {
	resp, err := w.c.openStream(ctx, jobPath(w.id)+"/events", w.eventID)
	if errors.Is(err, errStreamOver) {
		// The job is terminal and its terminal event was already sent (our
		// Last-Event-ID): nothing more will stream; one read gets the end.
		return nil, errNoSSE
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	// A silent stream (no event, no keep-alive) is a dead connection.
	idle := time.AfterFunc(sseIdle, func() { resp.Body.Close() })
	defer idle.Stop()
	var resync atomic.Bool
	quiet := time.AfterFunc(sseResync, func() { resync.Store(true); resp.Body.Close() })
	defer quiet.Stop()
	got := false
	err = sse.Read(resp.Body, func() { idle.Reset(sseIdle) }, func(ev sse.Event) (bool, error) {
		if ev.ID != "" {
			w.eventID = ev.ID
		}
		switch ev.Name {
		case "job", "", "message":
			var res api.Resource
			if err := json.Unmarshal(ev.Data, &res); err != nil || res.ID == "" {
				return false, fmt.Errorf("%w: event data is not a job resource", ErrUnexpectedResponse)
			}
			got = true
			quiet.Reset(sseResync)
			if w.deliver(&res) {
				return true, errTerminal{&res}
			}
		case "problem", "error": // "error" from servers before the rename
			var p struct {
				Detail string `json:"detail"`
			}
			_ = json.Unmarshal(ev.Data, &p)
			return true, fmt.Errorf("event stream error: %s", p.Detail)
		}
		return false, nil
	})
	var t errTerminal
	if errors.As(err, &t) {
		return t.res, nil
	}
	if resync.Load() {
		return nil, errResync
	}
	if err == nil && !got {
		err = io.ErrUnexpectedEOF
	}
	return nil, err
}

// errStreamOver: the server answered an event stream's request 204: the
// job or batch has ended, and the caller's Last-Event-ID was its last event.
var errStreamOver = errors.New("event stream over")

// openStream opens the event stream at path, resuming after lastID: a 200
// text/event-stream response, errStreamOver, errNoSSE when the server has
// no event stream there, or the server's refusal.
func (c *Client) openStream(ctx context.Context, path, lastID string) (*http.Response, error) {
	hdr := http.Header{"Accept": {"text/event-stream"}}
	if lastID != "" {
		hdr.Set("Last-Event-ID", lastID)
	}
	resp, _, err := c.send(ctx, &request{method: http.MethodGet, path: path, header: hdr, stream: true})
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNoContent:
		resp.Body.Close()
		return nil, errStreamOver
	case http.StatusMethodNotAllowed, http.StatusNotAcceptable, http.StatusNotImplemented:
		resp.Body.Close()
		return nil, errNoSSE
	default:
		return nil, c.unexpected(resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		resp.Body.Close()
		return nil, errNoSSE
	}
	return resp, nil
}

// errTerminal carries the terminal version out of the event loop.
type errTerminal struct{ res *api.Resource }

func (errTerminal) Error() string { return "terminal" }

// poll long-polls the job with its ETag until it is terminal. Requests are
// never closer together than the server's Retry-After; a server that
// honours ?wait holds each one until the job changes anyway.
func (w *waiter) poll(ctx context.Context) (*api.Resource, error) {
	etag := ""
	interval := defaultPoll
	for {
		start := w.c.clock.Now()
		s, err := w.c.GetIfChanged(ctx, w.id, etag, longPoll)
		if err != nil {
			return nil, fmt.Errorf("wait for %s: %w", w.id, err)
		}
		if !s.NotModified {
			if w.deliver(s.Job) {
				return s.Job, nil
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

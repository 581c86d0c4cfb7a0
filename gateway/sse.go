package gateway

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/pkg/job"
)

// sseHeartbeat keeps proxies from closing an idle stream.
const sseHeartbeat = 15 * time.Second

// jobEvents is GET /v1/jobs/{id}/events: Server-Sent Events, one `job`
// event per change with the job resource, the first at once, ending after a
// terminal state. Event ids are record revisions, so Last-Event-ID resumes
// without repeating what the client already has.
func (g *Gateway) jobEvents(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout)
	rec, err := g.lookup(ctx, identity(c), strings.Clone(c.Params("id")))
	cancel()
	if err != nil {
		return writeProblem(c, err)
	}
	var lastSent uint64
	if s := c.Get("Last-Event-ID"); s != "" {
		lastSent, _ = strconv.ParseUint(s, 10, 64)
	}
	key := rec.Key()
	ch, err := g.changes.watch(key)
	if err != nil {
		return writeProblem(c, fmt.Errorf("%w: %w", job.ErrUnavailable, err))
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache, no-store")
	c.Set("X-Accel-Buffering", "no")
	g.sseOpen.Add(1)
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer g.sseOpen.Add(-1)
		defer g.changes.unwatch(key, ch)
		g.streamJob(w, key, ch, lastSent)
	})
	return nil
}

// streamJob writes events until the job is terminal, the client goes away
// (a write fails) or the gateway stops.
func (g *Gateway) streamJob(w *bufio.Writer, key string, ch chan *job.Record, lastSent uint64) {
	beat := time.NewTicker(sseHeartbeat)
	defer beat.Stop()
	// Read after the watch was registered, so no change is missed.
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	rec, err := g.res.Jobs.Get(ctx, key)
	cancel()
	if err != nil {
		fmt.Fprintf(w, "event: error\ndata: {\"detail\":%q}\n\n", "job no longer readable")
		_ = w.Flush()
		return
	}
	for {
		if rec.Revision > lastSent {
			body, err := jsonMarshal(g.resource(rec))
			if err != nil {
				return
			}
			fmt.Fprintf(w, "id: %d\nevent: job\ndata: %s\n\n", rec.Revision, body)
			if err := w.Flush(); err != nil {
				return
			}
			lastSent = rec.Revision
		}
		if rec.State.Terminal() {
			return
		}
		select {
		case rec = <-ch:
		case <-beat.C:
			if _, err := w.WriteString(": keep-alive\n\n"); err != nil {
				return
			}
			if err := w.Flush(); err != nil {
				return
			}
		case <-g.stopped:
			return
		}
	}
}

// SSEStreams counts open event streams (metrics, benchmarks).
func (g *Gateway) SSEStreams() int64 { return g.sseOpen.Load() }

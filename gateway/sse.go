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

const (
	// sseRetry is the reconnect delay the stream asks an EventSource for
	// (the `retry:` field); a stream only ends early when the gateway stops
	// or the store fails, and both take a moment to come back.
	sseRetry = 3 * time.Second
)

// jobEvents is GET /v1/jobs/{id}/events: Server-Sent Events, one `job`
// event per change with the job resource, the first at once, ending after a
// terminal state. Event ids are record revisions, so Last-Event-ID resumes
// without repeating what the client already has.
//
// A standard EventSource reconnects whenever a stream ends, also after the
// terminal event; the reconnect carries that event's id and is answered 204
// No Content, which is what tells an EventSource to stop for good.
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
	if rec.State.Terminal() && lastSent >= rec.Revision {
		c.Set(fiber.HeaderCacheControl, "no-store")
		return c.SendStatus(fiber.StatusNoContent)
	}
	who := requesterOf(c)
	if !g.streams.acquire(who) {
		return g.streams.refuse(c)
	}
	key := rec.Key()
	ch, err := g.changes.watch(key)
	if err != nil {
		g.streams.release(who)
		return writeProblem(c, fmt.Errorf("%w: %w", job.ErrUnavailable, err))
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache, no-store")
	c.Set("X-Accel-Buffering", "no")
	// A stream's connection is not reused: its socket send buffer is kept
	// small, so a client that stops reading is noticed after a few KiB
	// rather than after megabytes of autotuned buffer.
	conn := c.Context().Conn()
	c.Context().SetConnectionClose()
	if s, ok := conn.(interface{ SetWriteBuffer(int) error }); ok {
		_ = s.SetWriteBuffer(sseSendBuffer)
	}
	g.sseOpen.Add(1)
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer g.sseOpen.Add(-1)
		defer g.streams.release(who)
		defer g.changes.unwatch(key, ch)
		g.streamJob(&deadlineWriter{Writer: w, conn: conn, timeout: g.cfg.StreamWriteTimeout}, key, ch, lastSent)
	})
	return nil
}

// streamJob writes events until the job is terminal, the client goes away
// (a write fails) or the gateway stops.
func (g *Gateway) streamJob(w *deadlineWriter, key string, ch chan *job.Record, lastSent uint64) {
	beat := time.NewTicker(g.cfg.StreamHeartbeat)
	defer beat.Stop()
	// Read after the watch was registered, so no change is missed.
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	rec, err := g.jobs.Get(ctx, key)
	cancel()
	fmt.Fprintf(w, "retry: %d\n\n", sseRetry.Milliseconds())
	if ferr := w.Flush(); ferr != nil {
		return
	}
	if err != nil {
		// Named `problem`, never `error`: that name is EventSource's own
		// connection-failure event. The reconnect then gets a plain 404 or
		// 503 problem, which ends an EventSource.
		body, _ := jsonMarshal(Problem{Type: "/problems/unavailable", Title: "Job store unavailable", Status: 503, Detail: "job no longer readable"})
		fmt.Fprintf(w, "event: problem\ndata: %s\n\n", body)
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

// sseSendBuffer is the socket send buffer of an event stream's connection.
const sseSendBuffer = 16 << 10

// deadlineWriter flushes an event stream with a write deadline: a client
// that stopped reading fails the flush after timeout, which ends the stream
// and frees its goroutine, watch and per-requester slot.
type deadlineWriter struct {
	*bufio.Writer
	conn    interface{ SetWriteDeadline(time.Time) error }
	timeout time.Duration
}

func (d *deadlineWriter) Flush() error {
	if d.conn != nil {
		_ = d.conn.SetWriteDeadline(time.Now().Add(d.timeout))
	}
	return d.Writer.Flush()
}

// SSEStreams counts open event streams (metrics, benchmarks).
func (g *Gateway) SSEStreams() int64 { return g.sseOpen.Load() }

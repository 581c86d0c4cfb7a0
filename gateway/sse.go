package gateway

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/job"
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
	if c.Method() == fiber.MethodHead { // the head a GET would get, no stream
		c.Set(fiber.HeaderContentType, "text/event-stream")
		c.Set(fiber.HeaderCacheControl, "no-cache, no-store")
		return c.SendStatus(fiber.StatusOK)
	}
	tenant, who := tenantOf(c), requesterOf(c)
	if full := g.streams.acquire(tenant, who); full != "" {
		return g.streams.refuse(c, full)
	}
	key := rec.Key()
	ch, err := g.changes.watch(key)
	if err != nil {
		g.streams.release(tenant, who)
		return writeProblem(c, fmt.Errorf("%w: %w", job.ErrUnavailable, err))
	}
	g.serveStream(c, func() {
		g.streams.release(tenant, who)
		g.changes.unwatch(key, ch)
	}, func(w *streamWriter) { g.streamJob(w, key, ch, lastSent) })
	return nil
}

// serveStream answers an event stream: write writes the events once the
// stream has the connection, and done (the stream's slot released, its
// source stopped) runs when it ends, whatever ends it.
//
// A stream's connection is not reused: its socket send buffer is kept
// small, so a client that stops reading is noticed after a few KiB rather
// than after megabytes of autotuned buffer. The stream takes the
// connection over once the handler returns (and every middleware has set
// its headers): its one goroutine writes the response head, then the
// events, straight to the socket. A body stream writer would hold a second
// goroutine, a pipe and three 4 KiB buffers per stream
// (docs/performance.md, footprint). The body goes out in chunks (to an
// HTTP/1.0 client as it is, until the close), and the connection closes
// after the last.
func (g *Gateway) serveStream(c *fiber.Ctx, done func(), write func(*streamWriter)) {
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache, no-store")
	c.Set("X-Accel-Buffering", "no")
	conn := c.Context().Conn()
	c.Context().SetConnectionClose()
	if s, ok := conn.(interface{ SetWriteBuffer(int) error }); ok {
		_ = s.SetWriteBuffer(sseSendBuffer)
	}
	g.sseOpen.Add(1)
	fctx := c.Context()
	fctx.Response.Header.Set(fiber.HeaderDate, time.Now().UTC().Format(http.TimeFormat)) // fasthttp adds it only to what it writes
	fctx.Response.Header.SetContentLength(-1)                                            // chunked
	fctx.HijackSetNoResponse(true)
	fctx.Hijack(func(hc net.Conn) {
		defer g.sseOpen.Add(-1)
		defer done()
		w := newStreamWriter(hc, g.cfg.StreamWriteTimeout, fctx.Request.Header.IsHTTP11())
		if err := w.head(fctx.Response.Header.Header()); err != nil {
			return
		}
		write(w)
		w.end()
	})
}

// streamJob writes events until the job is terminal, the client goes away
// (a write fails) or the gateway stops.
func (g *Gateway) streamJob(w *streamWriter, key string, ch chan *job.Record, lastSent uint64) {
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

// streamWriter writes an event stream to its hijacked connection as HTTP/1.1
// chunks, one per Flush, each with a write deadline: a client that stopped
// reading fails the flush after timeout, which ends the stream and frees
// its goroutine, watch and per-requester slot.
type streamWriter struct {
	conn    net.Conn
	timeout time.Duration
	// buf is the chunk being built: chunkRoom bytes kept for its size line,
	// then the data.
	buf []byte
	// chunked: an HTTP/1.0 client knows no chunks; its body is what comes
	// until the connection closes.
	chunked bool
}

// chunkRoom holds a chunk's size line: up to 8 hex digits and CRLF.
const chunkRoom = 10

// sseBuffer is the room an event stream's writer starts with: a job event
// fits in one chunk.
const sseBuffer = 2 << 10

func newStreamWriter(conn net.Conn, timeout time.Duration, chunked bool) *streamWriter {
	return &streamWriter{conn: conn, timeout: timeout, buf: make([]byte, chunkRoom, sseBuffer), chunked: chunked}
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *streamWriter) WriteString(s string) (int, error) {
	w.buf = append(w.buf, s...)
	return len(s), nil
}

// head writes the response head (status line and headers).
func (w *streamWriter) head(h []byte) error {
	if !w.chunked {
		h = bytes.Replace(h, []byte("Transfer-Encoding: chunked\r\n"), nil, 1)
	}
	return w.send(h)
}

// Flush sends what was written since the last Flush as one chunk.
func (w *streamWriter) Flush() error {
	n := len(w.buf) - chunkRoom
	if n == 0 {
		return nil
	}
	if !w.chunked {
		err := w.send(w.buf[chunkRoom:])
		w.buf = w.buf[:chunkRoom]
		return err
	}
	var hex [8]byte
	size := strconv.AppendUint(hex[:0], uint64(n), 16)
	start := chunkRoom - 2 - len(size)
	copy(w.buf[start:], size)
	w.buf[chunkRoom-2], w.buf[chunkRoom-1] = '\r', '\n'
	w.buf = append(w.buf, '\r', '\n')
	err := w.send(w.buf[start:])
	w.buf = w.buf[:chunkRoom]
	return err
}

// end sends the last chunk, so the client sees the body end cleanly.
func (w *streamWriter) end() {
	if w.chunked {
		_ = w.send([]byte("0\r\n\r\n"))
	}
}

func (w *streamWriter) send(p []byte) error {
	_ = w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
	_, err := w.conn.Write(p)
	return err
}

// SSEStreams counts open event streams (metrics, benchmarks).
func (g *Gateway) SSEStreams() int64 { return g.sseOpen.Load() }

package gateway

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/job"
)

// batchEvents is GET /v1/batches/{id}/events: Server-Sent Events, one
// `batch` event per change of the batch (an item's state moving on), the
// first at once, ending once the batch is done. The data is the batch
// resource without its jobs; the id is the batch's version (batchView),
// which only grows, so Last-Event-ID resumes, and a reconnect with the
// done event's id answers 204 No Content, as for a job. The stream counts
// as one against the requester's cap of open streams.
func (g *Gateway) batchEvents(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout)
	b, err := g.lookupBatch(ctx, c)
	cancel()
	if err != nil {
		return writeProblem(c, err)
	}
	lastSent := int64(-1) // none: the first event goes out at once
	if s := c.Get("Last-Event-ID"); s != "" {
		if n, err := strconv.ParseUint(s, 10, 32); err == nil {
			lastSent = int64(n)
		}
	}
	if lastSent >= 2*int64(len(b.Items)) { // the done event's id: nothing comes after it
		c.Set(fiber.HeaderCacheControl, "no-store")
		return c.SendStatus(fiber.StatusNoContent)
	}
	tenant, who := tenantOf(c), requesterOf(c)
	if full := g.streams.acquire(tenant, who); full != "" {
		return g.streams.refuse(c, full)
	}
	w, err := g.watchBatch(b)
	if err != nil {
		g.streams.release(tenant, who)
		return writeProblem(c, err)
	}
	g.serveStream(c, func() {
		g.streams.release(tenant, who)
		w.stop()
	}, func(sw *streamWriter) { g.streamBatch(sw, b, w, lastSent) })
	return nil
}

// streamBatch writes events until the batch is done, the client goes away
// or the gateway stops.
func (g *Gateway) streamBatch(sw *streamWriter, b *job.BatchRecord, w *batchWatch, lastSent int64) {
	beat := time.NewTicker(g.cfg.StreamHeartbeat)
	defer beat.Stop()
	fmt.Fprintf(sw, "retry: %d\n\n", sseRetry.Milliseconds())
	if sw.Flush() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	v, err := g.readBatchView(ctx, b) // after the watch: no change is missed
	cancel()
	if err != nil {
		body, _ := jsonMarshal(Problem{Type: "/problems/unavailable", Title: "Job store unavailable", Status: 503, Detail: "batch not readable now"})
		fmt.Fprintf(sw, "event: problem\ndata: %s\n\n", body)
		_ = sw.Flush()
		return
	}
	v.indexed()
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	for {
		if ver := int64(v.version()); ver > lastSent {
			body, err := jsonMarshal(v.resource(0, 0))
			if err != nil {
				return
			}
			fmt.Fprintf(sw, "id: %d\nevent: batch\ndata: %s\n\n", ver, body)
			if sw.Flush() != nil {
				return
			}
			lastSent = ver
		}
		if v.done() {
			return
		}
		rec, ok := w.next(sctx, beat.C, g.stopped)
		if !ok {
			select {
			case <-g.stopped:
				return
			default:
			}
			if _, err := sw.WriteString(": keep-alive\n\n"); err != nil || sw.Flush() != nil {
				return
			}
			continue
		}
		v.apply(rec)
	}
}

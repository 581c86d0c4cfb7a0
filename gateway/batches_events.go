package gateway

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// requesterEventSource follows one requester's events on JOBGATE_EVENTS
// (natsjs.EventStream).
type requesterEventSource interface {
	FollowRequester(ctx context.Context, tenant, requester string, after uint64) (*natsjs.RequesterFeed, error)
}

// requesterEvents is GET /v1/events: one Server-Sent Events stream of every
// stored change of the caller's own jobs, batch items included, as
// published on JOBGATE_EVENTS (`event: job`, `data:` the job resource
// without result.href, `id:` the event's stream sequence). Without
// Last-Event-ID it starts with the changes stored from now on; with one it
// resumes right after that event (from the oldest kept, 72 h, if it is
// gone). It never ends by itself, and counts as one stream against the
// requester's cap however many jobs it carries.
func (g *Gateway) requesterEvents(c *fiber.Ctx) error {
	id := identity(c)
	return g.followEvents(c, id.Tenant, id.Requester, g.newStreamBatches(id.Tenant, id.Requester))
}

// followEvents answers an event stream of JOBGATE_EVENTS under tenant and
// requester (each a subject token or "*"), resuming after Last-Event-ID,
// as one stream of the caller's caps; with batches, each item's change
// that moves its batch on is followed by the batch's event.
func (g *Gateway) followEvents(c *fiber.Ctx, tenantFilter, requesterFilter string, batches *streamBatches) error {
	src, ok := g.events.(requesterEventSource)
	if !ok {
		return writeProblem(c, job.ErrNotFound)
	}
	var after uint64
	if s := c.Get("Last-Event-ID"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return writeProblem(c, job.Userf(errBadRequest, "Last-Event-ID must be the id of an event this stream sent"))
		}
		after = n
	}
	tenant, who := tenantOf(c), requesterOf(c)
	if full := g.streams.acquire(tenant, who); full != "" {
		return g.streams.refuse(c, full)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout)
	feed, err := src.FollowRequester(ctx, tenantFilter, requesterFilter, after)
	cancel()
	if err != nil {
		g.streams.release(tenant, who)
		return writeProblem(c, fmt.Errorf("%w: %w", job.ErrUnavailable, err))
	}
	g.serveStream(c, func() {
		g.streams.release(tenant, who)
		feed.Stop()
	}, func(sw *streamWriter) { g.streamRequester(sw, feed, batches) })
	return nil
}

func (g *Gateway) streamRequester(sw *streamWriter, feed *natsjs.RequesterFeed, batches *streamBatches) {
	beat := time.NewTicker(g.cfg.StreamHeartbeat)
	defer beat.Stop()
	fmt.Fprintf(sw, "retry: %d\n\n", sseRetry.Milliseconds())
	if sw.Flush() != nil {
		return
	}
	for {
		select {
		case e, ok := <-feed.Events():
			if !ok {
				return
			}
			fmt.Fprintf(sw, "id: %d\nevent: job\ndata: %s\n\n", e.Seq, e.Data)
			if batches != nil {
				if body := batches.after(e); body != nil {
					writeBatchEvent(sw, e.Seq, body)
				}
			}
			if sw.Flush() != nil {
				return
			}
		case <-beat.C:
			if _, err := sw.WriteString(": keep-alive\n\n"); err != nil || sw.Flush() != nil {
				return
			}
		case <-g.stopped:
			return
		}
	}
}

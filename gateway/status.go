package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/job"
)

const readTimeout = 5 * time.Second

// lookup reads a job the caller may see: their own by key (isolation by
// construction: the key includes tenant and requester), or, for an admin, any
// job of their tenant. Anything else is job.ErrNotFound, exactly like a job
// that does not exist.
func (g *Gateway) lookup(ctx context.Context, id auth.Identity, jobID string) (*job.Record, error) {
	if !job.ValidID(jobID) {
		return nil, fmt.Errorf("job %q: %w", jobID, job.ErrNotFound)
	}
	rec, err := g.jobs.Get(ctx, job.StoreKey(id.Tenant, id.Requester, jobID))
	if errors.Is(err, job.ErrNotFound) && id.Admin {
		rec, err = g.jobs.FindInTenant(ctx, id.Tenant, jobID)
	}
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// getJob is GET /v1/jobs/{id}, with ETag/304 and ?wait= long-poll.
func (g *Gateway) getJob(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout)
	defer cancel()
	jobID := strings.Clone(c.Params("id"))
	rec, err := g.lookup(ctx, identity(c), jobID)
	if err != nil {
		return writeProblem(c, err)
	}
	var wait time.Duration
	if w := c.Query("wait"); w != "" {
		if wait, err = time.ParseDuration(w); err != nil || wait < 0 {
			return writeProblem(c, fmt.Errorf("%w: wait must be a duration like 20s", errBadQuery))
		}
	}
	inm := c.Get(fiber.HeaderIfNoneMatch)
	if wait > 0 && inm != "" && etagMatches(inm, rec) && !rec.State.Terminal() {
		who := requesterOf(c)
		if !g.polls.acquire(who) {
			return g.polls.refuse(c)
		}
		rec, err = g.waitForChange(c.UserContext(), rec, min(wait, g.cfg.MaxWait))
		g.polls.release(who)
		if err != nil {
			return writeProblem(c, err)
		}
	}
	if inm != "" && etagMatches(inm, rec) {
		c.Set(fiber.HeaderETag, etag(rec))
		c.Set(fiber.HeaderCacheControl, "private, no-store")
		if !rec.State.Terminal() {
			setRetryAfter(c, retryAfter(rec, g.cfg.Now()))
		}
		return c.SendStatus(http.StatusNotModified)
	}
	return g.writeJob(c, http.StatusOK, rec)
}

func etagMatches(header string, rec *job.Record) bool {
	tag := etag(rec)
	for _, part := range strings.Split(header, ",") {
		p := strings.TrimPrefix(strings.TrimSpace(part), "W/")
		if p == tag || p == "*" {
			return true
		}
	}
	return false
}

// cancelJob is DELETE /v1/jobs/{id}: queued or running jobs become canceled
// at once; a running render notices at its next checkpoint. Only the
// requester cancels: an admin token reads the tenant's jobs but cancels its
// own only, and someone else's job answers like a missing one (404).
func (g *Gateway) cancelJob(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout)
	defer cancel()
	own := identity(c)
	own.Admin = false
	rec, err := g.lookup(ctx, own, strings.Clone(c.Params("id")))
	if err != nil {
		return writeProblem(c, err)
	}
	now := g.cfg.Now()
	updated, err := g.jobs.Mutate(ctx, rec.Key(), func(r *job.Record) error {
		if r.State.Terminal() {
			return fmt.Errorf("job %s is %s: %w", r.ID, r.State, job.ErrTerminal)
		}
		return r.Cancel(now)
	})
	if err != nil {
		if errors.Is(err, natsjs.ErrStale) {
			err = fmt.Errorf("%w: %w", job.ErrUnavailable, err)
		}
		return writeProblem(c, err)
	}
	g.log.Info("job canceled", "job_id", updated.ID, "tenant", updated.Tenant)
	// The writer of a change announces it (the relay fills in only after a
	// crash): one event per change for plain subscribers.
	if _, err := g.events.Publish(ctx, updated); err != nil {
		g.log.Warn("cancel event left to the relay", "job_id", updated.ID, "err", err)
	}
	return g.writeJob(c, http.StatusAccepted, updated)
}

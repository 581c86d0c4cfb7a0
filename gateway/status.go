package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/retry"
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
		rec, err = g.findInTenant(ctx, id.Tenant, jobID)
	}
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// findInTenant finds a job of any requester of tenant by id, for an admin
// token: the query index names its requester, so no read lists the
// bucket's keys (a consumer per call).
func (g *Gateway) findInTenant(ctx context.Context, tenant, jobID string) (*job.Record, error) {
	e, ok := g.lookupIndexed(ctx, jobID)
	if !ok || e.Tenant != tenant {
		return nil, fmt.Errorf("job %s: %w", jobID, job.ErrNotFound)
	}
	return g.jobs.Get(ctx, job.StoreKey(e.Tenant, e.Requester, e.ID))
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
	wait, err := waitParam(c.Query("wait"))
	if err != nil {
		return writeProblem(c, err)
	}
	inm := c.Get(fiber.HeaderIfNoneMatch)
	if floor := etagFloor(inm); rec.Revision < floor {
		if rec, err = g.readAtLeast(ctx, rec.Key(), floor); err != nil {
			return writeProblem(c, err)
		}
	}
	if wait > 0 && inm != "" && etagMatches(inm, rec) && !rec.State.Terminal() {
		tenant, who := tenantOf(c), requesterOf(c)
		if full := g.polls.acquire(tenant, who); full != "" {
			return g.polls.refuse(c, full)
		}
		rec, err = g.waitForChange(c.UserContext(), rec, min(wait, g.cfg.MaxWait))
		g.polls.release(tenant, who)
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

// staleReadFor bounds how long a read that answered an older version than
// the client has seen is tried again (readAtLeast).
const staleReadFor = 2 * time.Second

// etagFloor is the highest record revision an If-None-Match header names:
// an ETag is the revision of a version the client was answered, so no
// answer to it may be older (0: none named).
func etagFloor(header string) uint64 {
	var floor uint64
	for part := range strings.SplitSeq(header, ",") {
		p := strings.TrimPrefix(strings.TrimSpace(part), "W/")
		if len(p) < 3 || len(p) > 22 || p[0] != '"' || p[len(p)-1] != '"' {
			continue
		}
		if n, err := strconv.ParseUint(p[1:len(p)-1], 10, 64); err == nil {
			floor = max(floor, n)
		}
	}
	return floor
}

// readAtLeast reads the record again until it is at least the version at
// revision floor, which the client was answered before — perhaps by another
// gateway. Reads go to the stream leader, but a node that was the leader
// and has not yet learned that another replaced it (it resumes from a
// pause, say) can answer for a moment with what it had; a client must not
// see its job go back. If the store does not catch up within staleReadFor,
// the job is unavailable here (503 + Retry-After), never older. A floor no
// version reached (a made-up ETag) costs its sender that wait, nothing more.
func (g *Gateway) readAtLeast(ctx context.Context, key string, floor uint64) (*job.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, staleReadFor)
	defer cancel()
	var rec *job.Record
	err := retry.Until(ctx, retry.Policy{First: 5 * time.Millisecond, Limit: 200 * time.Millisecond, Try: readTimeout,
		Retryable: func(err error) bool { return errors.Is(err, errBehind) }},
		func(ctx context.Context) error {
			r, err := g.jobs.Get(ctx, key)
			if err != nil {
				return err
			}
			if r.Revision < floor {
				return errBehind
			}
			rec = r
			return nil
		})
	if errors.Is(err, errBehind) {
		g.log.Warn("job read stayed behind the version the client has", "revision_seen", floor)
		return nil, fmt.Errorf("%w: the job's store answered an older version than this client has seen", job.ErrUnavailable)
	}
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// errBehind: a read answered an older version than one already answered.
var errBehind = errors.New("read behind an answered version")

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

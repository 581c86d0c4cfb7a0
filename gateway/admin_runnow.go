package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// adminRunNow is POST /v1/admin/jobs/{id}/run-now: a scheduled job the
// role reaches becomes queued at once, as if its run_at had come (202 with
// the job); any other job answers 409 job-not-scheduled. The move is a
// compare-and-set on the record, so it races safely with the waker; the
// job's entry in the scheduled set stays until a waker finds it settled
// and deletes it.
func (g *Gateway) adminRunNow(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout+adminIndexWait)
	defer cancel()
	id := identity(c)
	rec, err := g.adminFind(ctx, id, strings.Clone(c.Params("id")))
	if err != nil {
		return writeProblem(c, err)
	}
	updated, err := g.runNow(ctx, rec)
	if err != nil {
		return writeProblem(c, err)
	}
	g.log.InfoContext(ctx, "job run now by an admin", "job_id", updated.ID, "tenant", updated.Tenant, "by", id.Requester, "operator", id.Operator)
	return g.writeAdmin(c, http.StatusAccepted, adminView(updated, true))
}

// runNow makes a scheduled job queued and announces it: its event, then
// its work (the relay publishes both again from the change log when these
// are lost: the same messages, de-duplicated).
func (g *Gateway) runNow(ctx context.Context, rec *job.Record) (*job.Record, error) {
	now := g.cfg.Now()
	updated, err := g.jobs.Mutate(ctx, rec.Key(), func(r *job.Record) error {
		if r.State != job.StateScheduled {
			return job.Userf(job.ErrNotScheduled, "job %s is %s, not scheduled", r.ID, r.State)
		}
		return r.Due(now)
	})
	if err != nil {
		if errors.Is(err, natsjs.ErrStale) {
			err = fmt.Errorf("%w: %w", job.ErrUnavailable, err)
		}
		return nil, err
	}
	if _, err := g.events.Publish(ctx, updated); err != nil {
		g.log.Warn("run-now event left to the relay", "job_id", updated.ID, "err", err)
	} else if err := g.work.Publish(ctx, updated, 0); err != nil {
		g.log.Warn("run-now work left to the relay", "job_id", updated.ID, "err", err)
	}
	return updated, nil
}

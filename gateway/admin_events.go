package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/job"
)

// The console's live feed: GET /v1/admin/events, one Server-Sent Events
// stream of every stored change of every job the role reaches, as
// published on JOBGATE_EVENTS. It is GET /v1/events with the admin's scope:
// the same ordered consumer (natsjs.EventStream.FollowRequester, whose
// filter subject takes NATS wildcards for the tenant and the requester),
// the same `event: job` / `id:` stream sequence / Last-Event-ID resume, and
// one slot of the stream caps (gateway/holds.go) per stream however many
// jobs it carries: a tenant admin's counts against its tenant and itself,
// an operator's (no tenant) against the operator.

// adminConsoleRoutes registers what the console adds to the admin API. The
// /v1/admin group's middleware (adminRole, readLimit) runs first.
func (g *Gateway) adminConsoleRoutes(v1 fiber.Router) {
	v1.Get("/admin/events", g.adminEvents)
	v1.Get("/admin/jobs/:id/result", g.adminResultLink)
}

var adminEventParams = map[string]bool{"tenant": true}

// adminEventFilter is the tenant and requester tokens of the filter
// subject: a tenant admin's own tenant, an operator's ?tenant= or every
// tenant ("*"), every requester.
func adminEventFilter(c *fiber.Ctx) (tenant string, err error) {
	if err := checkParams(c, adminEventParams, "GET /v1/admin/events"); err != nil {
		return "", err
	}
	t := c.Query("tenant")
	if t != "" && !job.ValidScopeID(t) {
		return "", job.Userf(errBadQuery, "tenant must match [A-Za-z0-9_-]{1,64}")
	}
	scope := adminScope(identity(c), strings.Clone(t))
	if scope == "" {
		return "*", nil
	}
	return scope, nil
}

// adminEvents is GET /v1/admin/events (see above). Without Last-Event-ID it
// starts with the changes stored from now on; with one it resumes right
// after that event (from the oldest kept if it is gone). It never ends by
// itself; the gateway's stop ends it.
func (g *Gateway) adminEvents(c *fiber.Ctx) error {
	scope, err := adminEventFilter(c)
	if err != nil {
		return writeProblem(c, err)
	}
	return g.followEvents(c, scope, "*", nil)
}

// adminResult is the body of GET /v1/admin/jobs/{id}/result.
type adminResult struct {
	Href      string    `json:"href"`
	ExpiresAt time.Time `json:"expires_at"`
}

// adminResultLink is GET /v1/admin/jobs/{id}/result: a fresh signed link to
// a succeeded job's result, as JSON (the console puts it in a link; a 303
// would have its script download the file). The role reaches the job's
// params, errors and attempts already; its result is the same tenant's
// data, so the link is the owner's link (same claims, same expiry), minted
// per call and logged with who asked. Any other state answers as
// GET /v1/jobs/{id}/result does.
func (g *Gateway) adminResultLink(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout+adminIndexWait)
	defer cancel()
	id := identity(c)
	rec, err := g.adminFind(ctx, id, strings.Clone(c.Params("id")))
	if err != nil {
		return writeProblem(c, err)
	}
	switch rec.State {
	case job.StateSucceeded:
		if rec.Output == nil {
			return writeProblem(c, fmt.Errorf("job %s succeeded without a result: %w", rec.ID, job.ErrNoResult))
		}
		href, exp := g.signer.sign(rec.Tenant, rec.Requester, rec.ID, rec.Output.Object)
		g.log.LogAttrs(ctx, slog.LevelInfo, "admin result link", slog.String("job", rec.ID), slog.String("tenant", rec.Tenant),
			slog.String("by", id.Requester), slog.Bool("operator", id.Operator))
		return g.writeAdmin(c, http.StatusOK, adminResult{Href: href, ExpiresAt: exp.UTC()})
	case job.StateFailed:
		return writeProblem(c, fmt.Errorf("job %s failed: %w", rec.ID, job.ErrJobFailed))
	case job.StateCanceled:
		return writeProblem(c, fmt.Errorf("job %s: %w", rec.ID, job.ErrJobCanceled))
	}
	setRetryAfter(c, retryAfter(rec, g.cfg.Now()))
	return writeProblem(c, fmt.Errorf("job %s is %s: %w", rec.ID, rec.State, job.ErrResultNotReady))
}

package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/job"
)

const (
	maxBody            = 64 << 10
	transportBodyLimit = 1 << 20
)

func (g *Gateway) routes() {
	a := g.app
	a.Get("/healthz", g.healthz)
	a.Get("/readyz", g.readyz)
	a.Get("/openapi.yaml", g.openapi)
	a.Get("/metrics", g.metricsHandler())
	a.Get("/v1/results/:token", g.downloadResult)
	g.callbackRoutes() // before /v1's bearer tokens: the path's token is theirs

	v1 := a.Group("/v1", g.authenticate)
	v1.Post("/jobs", g.submit)
	v1.Get("/jobs", g.readLimit, g.listJobs)
	v1.Get("/jobs/:id", g.readLimit, g.getJob)
	v1.Delete("/jobs/:id", g.cancelLimit, g.cancelJob)
	v1.Get("/jobs/:id/result", g.readLimit, g.resultRedirect)
	v1.Get("/jobs/:id/events", g.readLimit, g.jobEvents)
	v1.Get("/types", g.readLimit, g.listTypes)
	v1.Get("/types/:name", g.readLimit, g.getType)
	g.batchRoutes(v1)
	g.adminRoutes(v1)
	g.adminTypeRoutes(v1)
	g.adminEndpointRoutes(v1)
	g.adminConsoleRoutes(v1)
	g.pageRoutes()
	a.Use(func(c *fiber.Ctx) error { return writeProblem(c, job.ErrNotFound) })
}

// handleError turns errors that escaped a handler (Fiber's own, like an
// oversized body) into problems; nothing reaches a client as a bare 500.
func (g *Gateway) handleError(c *fiber.Ctx, err error) error {
	var fe *fiber.Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case fiber.StatusRequestEntityTooLarge:
			return writeProblem(c, job.ErrPayloadTooLarge)
		case fiber.StatusNotFound:
			return writeProblem(c, job.ErrNotFound)
		case fiber.StatusMethodNotAllowed:
			return writeProblem(c, job.ErrMethodNotAllowed)
		}
		if fe.Code < 500 {
			// The status's own words: Fiber's message may quote the
			// parser's internals.
			return writeProblem(c, fmt.Errorf("%w: %w", job.Userf(errBadRequest, "%s", http.StatusText(fe.Code)), err))
		}
	}
	return writeProblem(c, err) // a 500, logged there with its cause
}

const identityKey = "identity"

// authenticate verifies the bearer token and stores the identity.
func (g *Gateway) authenticate(c *fiber.Ctx) error {
	h := c.Get(fiber.HeaderAuthorization)
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="jobgate"`)
		return writeProblem(c, job.ErrUnauthorized)
	}
	id, err := g.verifier.VerifyShared(tok)
	if err != nil {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="jobgate", error="invalid_token"`)
		return writeProblem(c, job.ErrUnauthorized)
	}
	if id.Tenant == "" && !strings.HasPrefix(c.Path(), "/v1/admin/") && !strings.HasPrefix(c.Path(), "/v1/types") {
		// An operator without a tenant has no jobs of its own.
		return writeProblem(c, job.Userf(job.ErrForbidden, "a token without a tenant reaches only the admin API and the types"))
	}
	c.Locals(identityKey, id) // a pointer: no copy on the heap per request
	return c.Next()
}

func identity(c *fiber.Ctx) auth.Identity {
	if id, ok := c.Locals(identityKey).(*auth.Identity); ok {
		return *id
	}
	return auth.Identity{}
}

// readLimit applies the per-requester read rate limit.
func (g *Gateway) readLimit(c *fiber.Ctx) error {
	id := identity(c)
	if wait, ok := g.reads.allowScope(id.Tenant, id.Requester); !ok {
		setRetryAfter(c, wait)
		return writeProblem(c, job.ErrRateLimited)
	}
	return c.Next()
}

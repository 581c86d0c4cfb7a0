package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// healthz says the process is alive; it touches nothing else.
func (g *Gateway) healthz(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok"})
}

// readyz says JetStream is reachable and the job bucket answers.
func (g *Gateway) readyz(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
	defer cancel()
	if err := g.jobs.Ping(ctx); err != nil {
		return writeProblem(c, fmt.Errorf("%w: %w", job.ErrUnavailable, err))
	}
	return c.JSON(fiber.Map{"status": "ready"})
}

//go:embed openapi.yaml
var openapiYAML []byte

// OpenAPI returns the embedded API description.
func OpenAPI() []byte { return openapiYAML }

func (g *Gateway) openapi(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, "application/yaml")
	return c.Send(openapiYAML)
}

// metricsHandler serves the process's Prometheus registry. The metrics
// name tenants, so with a MetricsToken configured only a scraper that sends
// it as its bearer token reads them; anyone else gets 401.
func (g *Gateway) metricsHandler() fiber.Handler {
	serve := func(c *fiber.Ctx) error { return c.SendString("") }
	if g.cfg.Metrics != nil {
		serve = adaptor.HTTPHandler(promhttp.HandlerFor(g.cfg.Metrics.Registry, promhttp.HandlerOpts{}))
	}
	if g.cfg.MetricsToken == "" {
		return serve
	}
	want := sha256.Sum256([]byte(g.cfg.MetricsToken))
	return func(c *fiber.Ctx) error {
		tok, ok := strings.CutPrefix(c.Get(fiber.HeaderAuthorization), "Bearer ")
		// Compared as digests: constant time, whatever the lengths.
		got := sha256.Sum256([]byte(tok))
		if !ok || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="jobgate metrics"`)
			return writeProblem(c, job.Userf(job.ErrUnauthorized, "/metrics needs the metrics token (JOBGATE_METRICS_TOKEN) as its bearer token"))
		}
		return serve(c)
	}
}

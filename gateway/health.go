package gateway

import (
	"context"
	_ "embed"
	"time"

	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/jobgate/jobgate/pkg/job"
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

// metricsHandler serves the process's Prometheus registry.
func (g *Gateway) metricsHandler() fiber.Handler {
	if g.cfg.Metrics == nil {
		return func(c *fiber.Ctx) error { return c.SendString("") }
	}
	return adaptor.HTTPHandler(promhttp.HandlerFor(g.cfg.Metrics.Registry, promhttp.HandlerOpts{}))
}

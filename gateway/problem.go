package gateway

import (
	"net/http"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/pkg/job"
)

// Problem is the RFC 9457 problem document; the catalogue of slugs, statuses
// and titles lives next to the sentinels in package job.
type Problem = job.Problem

// The gateway's own names for sentinels of the catalogue.
var (
	errUnsupportedMedia = job.ErrUnsupportedMedia
	errBadQuery         = job.ErrBadRequest
	errBadRequest       = job.ErrBadRequest
)

// writeProblem renders err as a problem. Details of internal errors are not
// shown to clients; they are logged by the caller.
func writeProblem(c *fiber.Ctx, err error) error {
	p := job.NewProblem(err)
	switch p.Status {
	case http.StatusServiceUnavailable:
		c.Set(fiber.HeaderRetryAfter, "2")
	case http.StatusTooManyRequests:
		if c.GetRespHeader(fiber.HeaderRetryAfter) == "" {
			c.Set(fiber.HeaderRetryAfter, "1")
		}
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Status(p.Status)
	body, _ := jsonMarshal(p)
	c.Set(fiber.HeaderContentType, "application/problem+json")
	return c.Send(body)
}

// setRetryAfter sets the Retry-After header in whole seconds.
func setRetryAfter(c *fiber.Ctx, seconds int) {
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(seconds))
}

package gateway

import (
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/metrics"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// countRequests is the first handler of every request: it counts the
// request by the pattern of the route that answered it (bounded: ids in
// paths make no series), its method and status, and its latency
// (jobgate_http_requests_total, _duration_seconds; 429 and 507 also on
// their own counters).
func countRequests(h *metrics.HTTP) fiber.Handler {
	return func(c *fiber.Ctx) error {
		start := time.Now()
		err := c.Next()
		if err != nil {
			// Fiber's error handler writes the answer after this
			// handler returns; writing it here gives the count its status.
			if herr := c.App().ErrorHandler(c, err); herr != nil {
				return herr
			}
		}
		h.Request(routeOf(c), methodOf(c), c.Response().StatusCode(), time.Since(start))
		return nil
	}
}

// routeOf is the pattern of the route that answered c, or "unmatched" when
// a handler of every path did (the catch-all's 404, a refused encoding):
// those are registered on "/", which no other path matches as a route.
func routeOf(c *fiber.Ctx) string {
	r := c.Route()
	if r == nil || r.Path == "" || (r.Path == "/" && c.Path() != "/") {
		return "unmatched"
	}
	return r.Path // the app's own string, not the request's buffer
}

// methodOf names c's method among those the API has, "other" for any
// other: a client's invented methods make no series. The names are
// constants: Fiber's c.Method() lives in a buffer reused by the next
// request.
func methodOf(c *fiber.Ctx) string {
	for _, m := range [...]string{fiber.MethodGet, fiber.MethodPost, fiber.MethodPut, fiber.MethodDelete, fiber.MethodHead, fiber.MethodPatch, fiber.MethodOptions} {
		if c.Method() == m {
			return m
		}
	}
	return "other"
}

// typeWorkers is what jobgate_workers, _worker_slots, _worker_busy_slots
// and jobgate_type_paused export: every declared type with its live
// presence, read at scrape time.
func (t *typeRegistry) typeWorkers(now time.Time) []metrics.TypeWorkers {
	t.mu.RLock()
	defer t.mu.RUnlock()
	byType := make(map[string]*metrics.TypeWorkers, len(t.decls))
	out := make([]metrics.TypeWorkers, 0, len(t.decls))
	for _, d := range t.decls {
		out = append(out, metrics.TypeWorkers{Type: d.Name, Endpoint: d.Endpoint != nil, Paused: d.Paused})
	}
	for i := range out {
		byType[out[i].Type] = &out[i]
	}
	for key, p := range t.workers {
		w := byType[strings.SplitN(key, ".", 2)[0]] // as liveWorkers counts them
		if w == nil || now.Sub(p.SeenAt) > natsjs.PresenceTTL {
			continue // a type no longer declared, or a presence expired and not yet removed
		}
		w.Workers++
		w.Slots += p.Concurrency
		if p.Busy != nil {
			w.Busy += *p.Busy
		}
	}
	return out
}

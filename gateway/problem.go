package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/job"
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

// headerRequestID names a request in both its answer and the log.
const headerRequestID = "X-Request-Id"

// appLogs is each gateway's logger by its Fiber app, for writeProblem,
// which every handler calls as a plain function.
var appLogs sync.Map // *fiber.App → *slog.Logger

func logOf(c *fiber.Ctx) *slog.Logger {
	if l, ok := appLogs.Load(c.App()); ok {
		return l.(*slog.Logger)
	}
	return slog.Default()
}

// writeProblem renders err as a problem. The client reads the catalogue's
// fixed detail (problemOf), never err's text; the text goes to the log
// with the request id the answer carries (X-Request-Id, and request_id in a
// 5xx body): every 500 at error level, a 503 at warn, anything else at
// debug.
func writeProblem(c *fiber.Ctx, err error) error {
	p := problemOf(err)
	id := requestID(c)
	c.Set(headerRequestID, id)
	if p.Status >= http.StatusInternalServerError {
		// Worth quoting to the operator. A 4xx body stays the same for
		// the same answer: a foreign job's 404 is byte for byte a
		// missing one's.
		p.RequestID = id
	}
	switch {
	case p.Status >= http.StatusInternalServerError && p.Status != http.StatusServiceUnavailable && p.Status != http.StatusInsufficientStorage:
		logProblem(c, slog.LevelError, id, p, err)
	case p.Status == http.StatusServiceUnavailable, p.Status == http.StatusInsufficientStorage:
		logProblem(c, slog.LevelWarn, id, p, err)
	default:
		logProblem(c, slog.LevelDebug, id, p, err)
	}
	switch p.Status {
	case http.StatusServiceUnavailable:
		c.Set(fiber.HeaderRetryAfter, "2")
	case http.StatusInsufficientStorage:
		// Space comes back as records and results reach their TTL, or when
		// an operator raises a budget: not within seconds.
		c.Set(fiber.HeaderRetryAfter, "60")
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

func logProblem(c *fiber.Ctx, level slog.Level, id string, p *Problem, err error) {
	log := logOf(c)
	ctx := c.UserContext()
	if !log.Enabled(ctx, level) {
		return
	}
	// The route's pattern, not the path: a signed result link is a
	// credential while it lasts.
	log.Log(ctx, level, "request answered with a problem", "request_id", id, "status", p.Status,
		"problem", p.Slug(), "method", c.Method(), "route", c.Route().Path, "err", err)
}

// requestID is the client's X-Request-Id when it is a plain token (so it
// cannot forge log lines), else a new random one.
func requestID(c *fiber.Ctx) string {
	if id := c.Get(headerRequestID); validRequestID(id) {
		return id
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// setRetryAfter sets the Retry-After header in whole seconds.
func setRetryAfter(c *fiber.Ctx, seconds int) {
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(seconds))
}

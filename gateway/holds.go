package gateway

import (
	"sync"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/job"
)

// holdRetryAfter is the Retry-After of a request refused because its
// requester holds too many open streams or long-polls: streams end with
// their jobs, long-polls within MaxWait, so a few seconds is a fair guess.
const holdRetryAfter = 5

// holds counts what each requester holds open at once (event streams, or
// long-polls) against a cap. Entries go when their count drops to zero, so
// memory follows the requesters with something open.
type holds struct {
	what string // for the problem's detail
	max  int
	mu   sync.Mutex
	n    map[string]int
}

func newHolds(what string, max int) *holds {
	return &holds{what: what, max: max, n: map[string]int{}}
}

// acquire takes one slot of who, or reports that who has max already.
func (h *holds) acquire(who string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n[who] >= h.max {
		return false
	}
	h.n[who]++
	return true
}

func (h *holds) release(who string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n[who] <= 1 {
		delete(h.n, who)
		return
	}
	h.n[who]--
}

// refuse answers 429 rate-limited with a Retry-After.
func (h *holds) refuse(c *fiber.Ctx) error {
	setRetryAfter(c, holdRetryAfter)
	return writeProblem(c, job.Userf(job.ErrRateLimited, "this requester has %d %s open, the most allowed at once", h.max, h.what))
}

// requesterOf is the key of the per-requester limits.
func requesterOf(c *fiber.Ctx) string {
	id := identity(c)
	return id.Tenant + "/" + id.Requester
}

// cancelLimit applies the per-requester rate limit of cancellations, the
// submissions' rate in a bucket of its own.
func (g *Gateway) cancelLimit(c *fiber.Ctx) error {
	if wait, ok := g.cancels.allow(requesterOf(c)); !ok {
		setRetryAfter(c, wait)
		return writeProblem(c, job.ErrRateLimited)
	}
	return c.Next()
}

package gateway

import (
	"sync"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/job"
)

// holdRetryAfter is the Retry-After of a request refused because too many
// streams or long-polls are open: streams end with their jobs, long-polls
// within MaxWait, so a few seconds is a fair guess.
const holdRetryAfter = 5

// holds counts what is held open at once (event streams, or long-polls)
// against three caps: per requester, per tenant and for the whole gateway
// process. Each one open costs memory (a goroutine, buffers, a watch), so
// the process cap bounds what all of them together cost, and the tenant cap
// keeps one tenant's many requesters from taking every slot. Entries go
// when their count drops to zero, so memory follows who has something open.
type holds struct {
	what                        string // for the problem's detail
	perRequester, perTenant, at int    // the caps; at is the process's
	mu                          sync.Mutex
	total                       int
	requesters, tenants         map[string]int
}

func newHolds(what string, perRequester, perTenant, total int) *holds {
	return &holds{what: what, perRequester: perRequester, perTenant: perTenant, at: total,
		requesters: map[string]int{}, tenants: map[string]int{}}
}

// acquire takes one slot for the requester of tenant, or says which cap is
// reached: "" when a slot was taken.
func (h *holds) acquire(tenant, requester string) (full string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch { // the narrowest cap reached is the one named
	case h.requesters[requester] >= h.perRequester:
		return "this requester"
	case h.tenants[tenant] >= h.perTenant:
		return "this tenant"
	case h.total >= h.at:
		return "this server"
	}
	h.total++
	h.tenants[tenant]++
	h.requesters[requester]++
	return ""
}

func (h *holds) release(tenant, requester string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total--
	dec(h.tenants, tenant)
	dec(h.requesters, requester)
}

func dec(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}

// open is how many are held open now.
func (h *holds) open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

// refuse answers 429 rate-limited with a Retry-After, naming the cap.
func (h *holds) refuse(c *fiber.Ctx, full string) error {
	setRetryAfter(c, holdRetryAfter)
	limit := h.perRequester
	switch full {
	case "this server":
		limit = h.at
	case "this tenant":
		limit = h.perTenant
	}
	return writeProblem(c, job.Userf(job.ErrRateLimited, "%s has %d %s open, the most allowed at once", full, limit, h.what))
}

// requesterOf is the key of the per-requester limits.
func requesterOf(c *fiber.Ctx) string {
	id := identity(c)
	return id.Tenant + "/" + id.Requester
}

// tenantOf is the key of the per-tenant limits.
func tenantOf(c *fiber.Ctx) string { return identity(c).Tenant }

// cancelLimit applies the per-requester rate limit of cancellations, the
// submissions' rate in a bucket of its own.
func (g *Gateway) cancelLimit(c *fiber.Ctx) error {
	if wait, ok := g.cancels.allow(requesterOf(c)); !ok {
		setRetryAfter(c, wait)
		return writeProblem(c, job.ErrRateLimited)
	}
	return c.Next()
}

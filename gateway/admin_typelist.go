package gateway

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// adminTypeSummary is one entry of GET /v1/admin/types: the entry of GET
// /v1/types (with its live workers and paused) plus what only an operator
// reads, the id of the credential that owns the type.
type adminTypeSummary struct {
	typeSummary
	Owner string `json:"owner,omitempty"`
	// SecretSince is when an endpoint type's current signing secret was
	// made (created, or last rotated): the console shows its age, so an
	// operator sees a secret that was never rotated.
	SecretSince *time.Time `json:"secret_since,omitempty"`
}

// endpointKeyReader reads an endpoint type's signing keys
// (natsjs.Secrets), for their age.
type endpointKeyReader interface {
	EndpointKeys(ctx context.Context, typ string) (*natsjs.EndpointKeys, error)
}

type adminTypePage struct {
	Types      []adminTypeSummary `json:"types"`
	NextCursor string             `json:"next_cursor,omitempty"`
}

var adminTypesParams = map[string]bool{"limit": true, "cursor": true}

// adminListTypes is GET /v1/admin/types (operator): the declared types a
// page at a time, by name, as GET /v1/types lists them, with their owners.
// The console's types view and an operator's scripts read it beside GET
// /v1/admin/workers.
func (g *Gateway) adminListTypes(c *fiber.Ctx) error {
	if err := checkParams(c, adminTypesParams, "GET /v1/admin/types"); err != nil {
		return writeProblem(c, err)
	}
	limit := typePageDefault
	if s := c.Query("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > typePageMax {
			return writeProblem(c, job.Userf(errBadQuery, "limit must be 1 to %d", typePageMax))
		}
		limit = n
	}
	var after string
	if s := c.Query("cursor"); s != "" {
		var err error
		if after, err = decodeTypeCursor(s); err != nil {
			return writeProblem(c, err)
		}
	}
	items, more := g.types.page(g.cfg.Now(), after, limit)
	page := adminTypePage{Types: make([]adminTypeSummary, len(items))}
	keys, _ := g.secrets.(endpointKeyReader)
	for i, t := range items {
		page.Types[i].typeSummary = t
		if d, ok := g.types.decl(t.Name); ok {
			page.Types[i].Owner = d.Owner
		}
		if t.Endpoint != nil && keys != nil {
			// A secret unreadable for now leaves its age out of the page
			// rather than fail the listing.
			if k, err := keys.EndpointKeys(c.UserContext(), t.Name); err == nil {
				since := k.CreatedAt
				if k.RotatedAt.After(since) {
					since = k.RotatedAt
				}
				page.Types[i].SecretSince = &since
			}
		}
	}
	if more {
		page.NextCursor = typeCursor(items[len(items)-1].Name)
	}
	return g.writeAdmin(c, http.StatusOK, page)
}

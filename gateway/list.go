package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/index"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/api"
)

const (
	// indexWait bounds how long a first page waits for the query index to
	// hold every change stored before the call.
	indexWait = time.Second
)

// listParams are the query parameters GET /v1/jobs takes; any other, or
// one given twice, answers 400 rather than being silently ignored (a
// client that filters by a parameter this server does not know would
// otherwise take the unfiltered page for the filtered one).
var listParams = map[string]bool{"state": true, "type": true, "limit": true, "cursor": true}

// listFilter is what a page keeps of the requester's jobs.
type listFilter struct {
	state job.State // "" for any
	typ   string    // "" for any
}

func (f listFilter) keeps(r *job.Record) bool {
	return (f.state == "" || r.State == f.state) && (f.typ == "" || r.Type == f.typ)
}

// checkListParams refuses unknown and repeated query parameters.
func checkListParams(c *fiber.Ctx) error {
	var bad error
	seen := make(map[string]bool, 4)
	c.Context().QueryArgs().VisitAll(func(k, _ []byte) {
		if bad != nil {
			return
		}
		name := string(k)
		switch {
		case !listParams[name]:
			bad = job.Userf(errBadQuery, "unknown query parameter %q: GET /v1/jobs takes state, type, limit and cursor", truncate(k, 32))
		case seen[name]:
			bad = job.Userf(errBadQuery, "query parameter %q given more than once", name)
		}
		seen[name] = true
	})
	return bad
}

// listPage is the body of GET /v1/jobs.
type listPage struct {
	Jobs       []*job.Resource `json:"jobs"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

// listJobs is GET /v1/jobs: the caller's own jobs, newest first.
//
// A page reads the gateway's query index (internal/index, kept from the
// record change log) and the records it names, so it costs in proportion
// to the page, not to the requester's history. The first page waits until
// the index holds every change stored before the call: a job admitted
// before it is on it. While the index is more than indexWait behind (being
// built on a gateway's first start), the records themselves are read
// instead: correct, at the cost of the requester's history.
func (g *Gateway) listJobs(c *fiber.Ctx) error {
	id := identity(c)
	if err := checkListParams(c); err != nil {
		return writeProblem(c, err)
	}
	limit := 20
	if s := c.Query("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			return writeProblem(c, job.Userf(errBadQuery, "limit must be 1 to 100"))
		}
		limit = n
	}
	var filter listFilter
	if s := c.Query("state"); s != "" {
		filter.state = job.State(strings.Clone(s))
		if !filter.state.Valid() {
			return writeProblem(c, job.Userf(errBadQuery, "state must be queued, running, succeeded, failed or canceled"))
		}
	}
	if s := c.Query("type"); s != "" {
		if !job.ValidTypeName(s) {
			return writeProblem(c, job.Userf(errBadQuery, "type must be a job type name ([a-z][a-z0-9_]{0,63})"))
		}
		filter.typ = strings.Clone(s)
	}
	var cur cursor
	if s := c.Query("cursor"); s != "" {
		var err error
		if cur, err = decodeCursor(s); err != nil {
			return writeProblem(c, err)
		}
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout+indexWait)
	defer cancel()
	var (
		page listPage
		err  error
	)
	switch {
	case cur.index != "":
		page, err = g.indexPage(ctx, id.Tenant, id.Requester, filter, limit, cur.index)
	case !cur.created.IsZero():
		page, err = g.scanPage(ctx, id.Tenant, id.Requester, filter, limit, &cur)
	case g.query.CatchUp(ctx, indexWait) != nil:
		page, err = g.scanPage(ctx, id.Tenant, id.Requester, filter, limit, nil)
	default:
		page, err = g.indexPage(ctx, id.Tenant, id.Requester, filter, limit, "")
	}
	if err != nil {
		return writeProblem(c, err)
	}
	if page.Jobs == nil {
		page.Jobs = []*job.Resource{}
	}
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	body, err := jsonMarshal(page)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body)
}

// indexPage reads a page of the requester's jobs from the query index,
// after the index cursor after ("" from the newest), each record by key.
// An entry whose record is gone, belongs to an earlier job under the same
// id, or no longer passes the filter (the index follows the records a
// moment behind) is skipped. A page that ends at the index's scan bound has
// a cursor and may hold fewer than limit jobs.
func (g *Gateway) indexPage(ctx context.Context, tenant, requester string, filter listFilter, limit int, after string) (listPage, error) {
	var page listPage
	p, err := g.query.Page(index.Query{Tenant: tenant, Requester: requester, State: filter.state, Type: filter.typ,
		Limit: limit, After: after})
	if err != nil {
		return page, err
	}
	for _, e := range p.Entries {
		rec, err := g.jobs.Get(ctx, job.StoreKey(tenant, requester, e.ID))
		if errors.Is(err, job.ErrNotFound) {
			continue // expired
		}
		if err != nil {
			return page, err
		}
		if rec.CreatedAt.UnixNano() != e.Created || !filter.keeps(rec) {
			continue
		}
		page.Jobs = append(page.Jobs, g.resource(rec))
	}
	if p.Next != "" {
		page.NextCursor = encodeCursor(cursor{index: p.Next})
	}
	return page, nil
}

// scanPage is the page read from the records themselves, for deployments
// whose relay never ran (and cursors issued by such a read): it reads every
// record of the requester.
func (g *Gateway) scanPage(ctx context.Context, tenant, requester string, filter listFilter, limit int, after *cursor) (listPage, error) {
	var page listPage
	recs, err := g.jobs.List(ctx, tenant, requester)
	if err != nil {
		return page, err
	}
	sort.Slice(recs, func(i, j int) bool { return newer(recs[i], recs[j]) })
	for _, r := range recs {
		if !filter.keeps(r) {
			continue
		}
		if after != nil && !after.before(r) {
			continue
		}
		if len(page.Jobs) == limit {
			last := page.Jobs[len(page.Jobs)-1]
			page.NextCursor = encodeCursor(cursor{created: last.CreatedAt, id: last.ID})
			break
		}
		page.Jobs = append(page.Jobs, g.resource(r))
	}
	return page, nil
}

func newer(a, b *job.Record) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return a.ID > b.ID
}

// cursor marks where the next page starts: the query index's own cursor,
// or, for a page read from the records, strictly after a job in
// newest-first order. Either way jobs admitted meanwhile do not shift
// pages.
type cursor struct {
	index   string
	created time.Time
	id      string
}

func (cur cursor) before(r *job.Record) bool {
	return newer(&job.Record{CreatedAt: cur.created, ID: cur.id}, r)
}

func encodeCursor(cur cursor) string {
	if cur.index != "" {
		return base64.RawURLEncoding.EncodeToString([]byte("q" + cur.index))
	}
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(cur.created.UnixNano(), 10) + "." + cur.id))
}

func decodeCursor(s string) (cursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		if ic, ok := strings.CutPrefix(string(raw), "q"); ok {
			if ic != "" && len(ic) <= api.MaxAdminCursorLen {
				return cursor{index: ic}, nil
			}
		} else {
			ns, id, ok := strings.Cut(string(raw), ".")
			n, perr := strconv.ParseInt(ns, 10, 64)
			if ok && perr == nil && job.ValidID(id) {
				return cursor{created: time.Unix(0, n).UTC(), id: id}, nil
			}
		}
	}
	return cursor{}, job.Userf(errBadQuery, "cursor is not one this server issued")
}

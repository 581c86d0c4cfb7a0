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
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
)

// jobIndex pages through a requester's admissions, newest first
// (natsjs.Index).
type jobIndex interface {
	Page(ctx context.Context, tenant, requester string, before uint64, n int) ([]natsjs.IndexEntry, error)
}

const (
	// indexWait bounds how long a first page waits for the indexer to list
	// the jobs admitted before the call.
	indexWait = time.Second
	// maxListScan bounds the index entries one page looks at when a state
	// or type filter skips most of them; the page then ends early with a
	// cursor.
	maxListScan = 250
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
// A page reads the requester's index (JOBGATE_INDEX, which the dispatchers'
// indexer keeps from the record change log) and the records it names, so it
// costs in proportion to the page, not to the requester's history. The
// first page waits until the indexer has handled every change committed
// before the call: a job admitted before it is on it. Before any indexer
// has run (no dispatcher yet), or while it is more than indexWait behind,
// the records themselves are read instead: correct, at the old cost.
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
	case cur.ordinal > 0:
		page, err = g.indexPage(ctx, id.Tenant, id.Requester, filter, limit, cur.ordinal)
	case !cur.created.IsZero():
		page, err = g.scanPage(ctx, id.Tenant, id.Requester, filter, limit, &cur)
	default:
		var progress natsjs.IndexProgress
		progress, err = g.jobs.WaitForIndex(ctx, indexWait)
		switch {
		case err != nil:
		case progress != natsjs.IndexCaughtUp || g.index == nil:
			// No indexer ever ran, or it is far behind: the index may miss
			// jobs admitted before this call, the records do not.
			page, err = g.scanPage(ctx, id.Tenant, id.Requester, filter, limit, nil)
		default:
			page, err = g.indexPage(ctx, id.Tenant, id.Requester, filter, limit, 0)
		}
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

// indexPage reads a page from the requester's index: entries with ordinals
// below before (0: from the newest), each record by key. Entries whose
// record expired, or that belong to an earlier job under the same id, are
// skipped. With a filter at most maxListScan entries are looked at; a page
// that ends there has a cursor and may hold fewer than limit jobs.
func (g *Gateway) indexPage(ctx context.Context, tenant, requester string, filter listFilter, limit int, before uint64) (listPage, error) {
	var page listPage
	scanned := 0
	for {
		// One entry more than needed tells whether a next page exists.
		want := min(limit-len(page.Jobs)+1, maxListScan-scanned)
		entries, err := g.index.Page(ctx, tenant, requester, before, want)
		if err != nil {
			return page, err
		}
		for _, e := range entries {
			if len(page.Jobs) == limit {
				page.NextCursor = encodeCursor(cursor{ordinal: before})
				return page, nil
			}
			before = e.Ordinal
			scanned++
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
		switch {
		case len(entries) < want || before == 0:
			return page, nil // the oldest entry was read
		case scanned >= maxListScan:
			page.NextCursor = encodeCursor(cursor{ordinal: before})
			return page, nil
		}
	}
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

// cursor marks where the next page starts: below an index ordinal, or, for
// a page read from the records, strictly after a job in newest-first order.
// Either way jobs admitted meanwhile do not shift pages.
type cursor struct {
	ordinal uint64
	created time.Time
	id      string
}

func (cur cursor) before(r *job.Record) bool {
	return newer(&job.Record{CreatedAt: cur.created, ID: cur.id}, r)
}

func encodeCursor(cur cursor) string {
	if cur.ordinal > 0 {
		return base64.RawURLEncoding.EncodeToString([]byte("i" + strconv.FormatUint(cur.ordinal, 10)))
	}
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(cur.created.UnixNano(), 10) + "." + cur.id))
}

func decodeCursor(s string) (cursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		if ord, ok := strings.CutPrefix(string(raw), "i"); ok {
			if n, err := strconv.ParseUint(ord, 10, 64); err == nil && n > 0 {
				return cursor{ordinal: n}, nil
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

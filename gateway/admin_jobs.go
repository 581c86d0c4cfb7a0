package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/index"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/api"
)

// The admin API (/v1/admin): a tenant admin reaches every job of its
// tenant, an operator every job. Listings and counts come from the
// gateway's query index (internal/index), derived from the record change
// log; each job shown is read again from the bucket, the source of truth.

// queryIndex is what the admin API needs of the query index (index.Index).
type queryIndex interface {
	Page(q index.Query) (index.Page, error)
	Stats(tenant string, now time.Time) ([]api.TypeStats, error)
	Minutes(tenant string, now time.Time) (map[string]*api.MinuteSeries, error)
	Lookup(id string) (index.Entry, bool)
	CatchUp(ctx context.Context, wait time.Duration) error
	Close() error
}

// adminIndexWait bounds how long an admin read waits for the query index to
// hold every change stored before the call; past it the answer is 503 with
// Retry-After (an index being rebuilt).
const adminIndexWait = 2 * time.Second

// openIndex opens the query index in the configured dir (a temporary one,
// removed on Stop, when none is).
func (g *Gateway) openIndex() error {
	dir := g.cfg.IndexDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "jobgate-index-")
		if err != nil {
			return fmt.Errorf("gateway: query index: %w", err)
		}
		dir, g.indexTmp = tmp, tmp
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("gateway: query index: %w", err)
	}
	x, err := index.Open(filepath.Join(dir, "jobs.index"), g.indexSrc, index.Options{Log: g.log, Now: g.cfg.Now})
	if errors.Is(err, index.ErrLocked) && g.indexTmp == "" {
		// Another gateway keeps its index there: this one builds its own.
		g.log.Warn("query index held by another process, building one in a temporary dir", "dir", dir)
		tmp, terr := os.MkdirTemp("", "jobgate-index-")
		if terr != nil {
			return fmt.Errorf("gateway: query index: %w", terr)
		}
		g.indexTmp = tmp
		x, err = index.Open(filepath.Join(tmp, "jobs.index"), g.indexSrc, index.Options{Log: g.log, Now: g.cfg.Now})
	}
	if err != nil {
		return fmt.Errorf("gateway: query index: %w", err)
	}
	g.query = x
	return nil
}

func (g *Gateway) closeIndex() {
	if g.query != nil {
		if err := g.query.Close(); err != nil {
			g.log.Warn("query index close", "err", err)
		}
	}
	if g.indexTmp != "" {
		_ = os.RemoveAll(g.indexTmp)
	}
}

func (g *Gateway) adminRoutes(v1 fiber.Router) {
	ad := v1.Group("/admin", g.adminRole, g.readLimit)
	ad.Get("/jobs", g.adminListJobs)
	ad.Get("/jobs/:id", g.adminGetJob)
	ad.Post("/jobs/:id/cancel", g.adminCancelJob)
	ad.Post("/jobs/:id/retry", g.adminRetryJob)
	ad.Post("/jobs/:id/run-now", g.adminRunNow)
	ad.Post("/jobs/cancel", g.cancelLimit, g.adminBulkCancel)
	ad.Post("/jobs/retry", g.cancelLimit, g.adminBulkRetry)
	ad.Get("/stats", g.adminStats)
}

// adminRole lets through tenant admins and operators only.
func (g *Gateway) adminRole(c *fiber.Ctx) error {
	id := identity(c)
	if !id.Admin && !id.Operator {
		return writeProblem(c, job.Userf(job.ErrForbidden, "the admin API needs a tenant admin or an operator token"))
	}
	return c.Next()
}

// adminScope is the tenant an admin request reads: a tenant admin's own,
// an operator's ?tenant= ("" for every tenant).
func adminScope(id auth.Identity, tenant string) string {
	if id.Operator {
		return tenant
	}
	return id.Tenant
}

// reaches says whether id's role reaches the job.
func reaches(id auth.Identity, rec *job.Record) bool {
	return id.Operator || (id.Admin && rec.Tenant == id.Tenant)
}

var adminListParams = map[string]bool{"tenant": true, "requester": true, "type": true, "state": true, "category": true,
	"created_after": true, "created_before": true, "limit": true, "cursor": true, "waiting_for": true}

// waitingValues are the values of the waiting_for filter.
var waitingValues = map[string]bool{api.WaitingForConcurrency: true, api.WaitingForRateLimit: true, api.WaitingForWorker: true, api.WaitingForResume: true}

// maxWaitingScan bounds the jobs one page filtered by waiting_for reads
// (what a job waits for is not in the index: each is read and judged); past
// it the page ends early, with a cursor.
const maxWaitingScan = 500

// failureCategories are the values of the category filter (GET
// /v1/admin/jobs, the bulk calls): every failure category, and canceled.
var failureCategories = []string{job.CategoryTimeout, job.CategoryBudgetExceeded, job.CategoryRenderError, job.CategoryHandlerError,
	job.CategoryWorkerLost, job.CategoryExhausted, api.CategoryExpired, job.CategoryInternal, job.CategoryCanceled, job.CategoryDeadline}

var categories = func() map[string]bool {
	m := make(map[string]bool, len(failureCategories))
	for _, c := range failureCategories {
		m[c] = true
	}
	return m
}()

// categoryHint is the message of a category filter that names none.
var categoryHint = "must be a failure category (" + strings.Join(failureCategories, ", ") + ")"

// checkParams refuses unknown and repeated query parameters.
func checkParams(c *fiber.Ctx, allowed map[string]bool, path string) error {
	var bad error
	seen := make(map[string]bool, len(allowed))
	c.Context().QueryArgs().VisitAll(func(k, _ []byte) {
		if bad != nil {
			return
		}
		name := string(k)
		switch {
		case !allowed[name]:
			bad = job.Userf(errBadQuery, "unknown query parameter %q of %s", truncate(k, 32), path)
		case seen[name]:
			bad = job.Userf(errBadQuery, "query parameter %q given more than once", name)
		}
		seen[name] = true
	})
	return bad
}

// adminQuery reads the filters of GET /v1/admin/jobs.
func adminQuery(c *fiber.Ctx, id auth.Identity) (index.Query, error) {
	q := index.Query{Limit: api.DefaultAdminPage}
	if err := checkParams(c, adminListParams, "GET /v1/admin/jobs"); err != nil {
		return q, err
	}
	scopeID := func(name string) (string, error) {
		s := c.Query(name)
		if s != "" && !job.ValidScopeID(s) {
			return "", job.Userf(errBadQuery, "%s must match [A-Za-z0-9_-]{1,64}", name)
		}
		return strings.Clone(s), nil
	}
	tenant, err := scopeID("tenant")
	if err != nil {
		return q, err
	}
	q.Tenant = adminScope(id, tenant)
	if q.Requester, err = scopeID("requester"); err != nil {
		return q, err
	}
	if s := c.Query("type"); s != "" {
		if !job.ValidTypeName(s) {
			return q, job.Userf(errBadQuery, "type must be a job type name ([a-z][a-z0-9_]{0,63})")
		}
		q.Type = strings.Clone(s)
	}
	if s := c.Query("state"); s != "" {
		q.State = job.State(strings.Clone(s))
		if !q.State.Valid() {
			return q, job.Userf(errBadQuery, "state must be queued, running, succeeded, failed or canceled")
		}
	}
	if s := c.Query("category"); s != "" {
		if !categories[s] {
			return q, job.Userf(errBadQuery, "category %s", categoryHint)
		}
		q.Category = strings.Clone(s)
	}
	for name, dst := range map[string]*time.Time{"created_after": &q.CreatedAfter, "created_before": &q.CreatedBefore} {
		if s := c.Query(name); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil || len(s) > 40 {
				return q, job.Userf(errBadQuery, "%s must be an RFC 3339 time", name)
			}
			*dst = t
		}
	}
	if s := c.Query("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > api.MaxAdminPage {
			return q, job.Userf(errBadQuery, "limit must be 1 to %d", api.MaxAdminPage)
		}
		q.Limit = n
	}
	if s := c.Query("cursor"); s != "" {
		if len(s) > api.MaxAdminCursorLen {
			return q, job.Userf(errBadQuery, "cursor is not one this server issued")
		}
		q.After = strings.Clone(s)
	}
	return q, nil
}

// adminIndex is the query index caught up with the store, or an error.
func (g *Gateway) adminIndex(ctx context.Context) (queryIndex, error) {
	if err := g.query.CatchUp(ctx, adminIndexWait); err != nil {
		return nil, err
	}
	return g.query, nil
}

// adminListJobs is GET /v1/admin/jobs.
func (g *Gateway) adminListJobs(c *fiber.Ctx) error {
	id := identity(c)
	q, err := adminQuery(c, id)
	if err != nil {
		return writeProblem(c, err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout+adminIndexWait)
	defer cancel()
	x, err := g.adminIndex(ctx)
	if err != nil {
		return writeProblem(c, err)
	}
	if wf := c.Query("waiting_for"); wf != "" {
		return g.adminListWaiting(ctx, c, x, q, wf)
	}
	page, err := x.Page(q)
	if err != nil {
		if errors.Is(err, job.ErrBadRequest) {
			err = job.Userf(errBadQuery, "cursor is not one this server issued")
		}
		return writeProblem(c, err)
	}
	out := api.AdminJobPage{Jobs: make([]api.AdminJob, 0, len(page.Entries)), NextCursor: page.Next}
	for _, e := range page.Entries {
		rec, err := g.jobs.Get(ctx, job.StoreKey(e.Tenant, e.Requester, e.ID))
		if errors.Is(err, job.ErrNotFound) {
			continue // gone since the index was written
		}
		if err != nil {
			return writeProblem(c, err)
		}
		if !keepsRecord(&q, rec) {
			continue // changed since the index was written
		}
		out.Jobs = append(out.Jobs, adminView(rec, false))
	}
	return g.writeAdmin(c, http.StatusOK, out)
}

// adminListWaiting is GET /v1/admin/jobs?waiting_for=: the jobs waiting
// to run (queued, or running between attempts) that wait for wf now, as
// each one's waiting_for says. The index's pages are read on until the
// page is full, the index ends, or maxWaitingScan jobs were read; the
// state of each flow key is read once per call.
func (g *Gateway) adminListWaiting(ctx context.Context, c *fiber.Ctx, x queryIndex, q index.Query, wf string) error {
	if !waitingValues[wf] {
		return writeProblem(c, job.Userf(errBadQuery, "waiting_for must be concurrency, rate limit, worker or resume"))
	}
	switch q.State {
	case "":
		q.State = job.StateQueued
	case job.StateQueued, job.StateRunning:
	default:
		return writeProblem(c, job.Userf(errBadQuery, "waiting_for keeps queued or running jobs only; the state filter is %s", q.State))
	}
	want := q.Limit
	out := api.AdminJobPage{Jobs: make([]api.AdminJob, 0, want)}
	memo := map[string]string{}
	read := 0
	for {
		q.Limit = min(api.MaxAdminPage, max(want-len(out.Jobs), 20))
		page, err := x.Page(q)
		if err != nil {
			if errors.Is(err, job.ErrBadRequest) {
				err = job.Userf(errBadQuery, "cursor is not one this server issued")
			}
			return writeProblem(c, err)
		}
		for i, e := range page.Entries {
			if len(out.Jobs) == want || read == maxWaitingScan {
				out.NextCursor = index.CursorAfter(page.Entries[i-1])
				return g.writeAdmin(c, http.StatusOK, out)
			}
			read++
			rec, err := g.jobs.Get(ctx, job.StoreKey(e.Tenant, e.Requester, e.ID))
			if errors.Is(err, job.ErrNotFound) {
				continue
			}
			if err != nil {
				return writeProblem(c, err)
			}
			if !keepsRecord(&q, rec) || g.waitingForMemo(rec, memo) != wf {
				continue
			}
			out.Jobs = append(out.Jobs, adminView(rec, false))
			out.Jobs[len(out.Jobs)-1].WaitingFor = wf
		}
		if page.Next == "" {
			return g.writeAdmin(c, http.StatusOK, out)
		}
		q.After = page.Next
		if len(out.Jobs) == want || read >= maxWaitingScan {
			out.NextCursor = page.Next
			return g.writeAdmin(c, http.StatusOK, out)
		}
	}
}

func keepsRecord(q *index.Query, r *job.Record) bool {
	cat := ""
	if r.State == job.StateFailed && r.Error != nil {
		cat = r.Error.Category
	}
	return (q.Tenant == "" || r.Tenant == q.Tenant) && (q.Requester == "" || r.Requester == q.Requester) &&
		(q.Type == "" || r.Type == q.Type) && (q.State == "" || r.State == q.State) && (q.Category == "" || cat == q.Category)
}

// adminView is the admin API's view of a job; with detail, its attempts
// and retry links. It carries no signed result link: that is the owner's.
func adminView(rec *job.Record, detail bool) api.AdminJob {
	v := api.AdminJob{Resource: *rec.Resource("", time.Time{}), Tenant: rec.Tenant, Requester: rec.Requester,
		RetryOf: rec.RetryOf, RetriedAs: rec.RetriedAs}
	if detail {
		v.Attempts = rec.Attempts
	}
	return v
}

func (g *Gateway) writeAdmin(c *fiber.Ctx, status int, v any) error {
	body, err := jsonMarshal(v)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Status(status).Send(body)
}

// adminFind reads a job the role reaches; anything else is not found.
func (g *Gateway) adminFind(ctx context.Context, id auth.Identity, jobID string) (*job.Record, error) {
	if !job.ValidID(jobID) {
		return nil, fmt.Errorf("job %q: %w", jobID, job.ErrNotFound)
	}
	var rec *job.Record
	var err error
	if e, ok := g.lookupIndexed(ctx, jobID); ok {
		rec, err = g.jobs.Get(ctx, job.StoreKey(e.Tenant, e.Requester, e.ID))
	} else if !id.Operator {
		rec, err = g.jobs.FindInTenant(ctx, id.Tenant, jobID)
	} else {
		err = fmt.Errorf("job %s: %w", jobID, job.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if !reaches(id, rec) {
		return nil, fmt.Errorf("job %s: %w", jobID, job.ErrNotFound)
	}
	return rec, nil
}

// lookupIndexed finds a job's scope in the query index, caught up first
// when it does not hold the job yet.
func (g *Gateway) lookupIndexed(ctx context.Context, jobID string) (index.Entry, bool) {
	if e, ok := g.query.Lookup(jobID); ok {
		return e, true
	}
	if err := g.query.CatchUp(ctx, adminIndexWait); err != nil {
		return index.Entry{}, false
	}
	return g.query.Lookup(jobID)
}

// adminGetJob is GET /v1/admin/jobs/{id}.
func (g *Gateway) adminGetJob(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout+adminIndexWait)
	defer cancel()
	rec, err := g.adminFind(ctx, identity(c), strings.Clone(c.Params("id")))
	if err != nil {
		return writeProblem(c, err)
	}
	c.Set(fiber.HeaderETag, etag(rec))
	v := adminView(rec, true)
	v.WaitingFor = g.waitingFor(rec)
	return g.writeAdmin(c, http.StatusOK, v)
}

// adminCancelJob is POST /v1/admin/jobs/{id}/cancel: DELETE /v1/jobs/{id}
// for any job the role reaches.
func (g *Gateway) adminCancelJob(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout+adminIndexWait)
	defer cancel()
	id := identity(c)
	rec, err := g.adminFind(ctx, id, strings.Clone(c.Params("id")))
	if err != nil {
		return writeProblem(c, err)
	}
	updated, err := g.adminCancel(ctx, id, rec, slog.LevelInfo)
	if err != nil {
		return writeProblem(c, err)
	}
	return g.writeAdmin(c, http.StatusAccepted, adminView(updated, true))
}

// adminCancel cancels a job an admin reaches, by compare-and-set through
// the lifecycle (a terminal job is ErrTerminal), and announces the change.
// Both the single and the bulk cancel come through here; lvl is the level
// of its log line (a bulk call logs each job at debug, itself at info).
func (g *Gateway) adminCancel(ctx context.Context, id auth.Identity, rec *job.Record, lvl slog.Level) (*job.Record, error) {
	now := g.cfg.Now()
	updated, err := g.jobs.Mutate(ctx, rec.Key(), func(r *job.Record) error {
		if r.State.Terminal() {
			return fmt.Errorf("job %s is %s: %w", r.ID, r.State, job.ErrTerminal)
		}
		return r.Cancel(now)
	})
	if err != nil {
		if errors.Is(err, natsjs.ErrStale) {
			err = fmt.Errorf("%w: %w", job.ErrUnavailable, err)
		}
		return nil, err
	}
	g.log.Log(ctx, lvl, "job canceled by an admin", "job_id", updated.ID, "tenant", updated.Tenant, "by", id.Requester, "operator", id.Operator)
	if _, err := g.events.Publish(ctx, updated); err != nil {
		g.log.Warn("cancel event left to the relay", "job_id", updated.ID, "err", err)
	}
	return updated, nil
}

// retryKey is the key under which an admin retry of job old with the
// admin's Idempotency-Key is admitted in the old job's scope. It holds a
// NUL, which no client's Idempotency-Key can: a retry never takes the id of
// a submission.
func retryKey(oldID, key string) string { return "\x00admin-retry\x00" + oldID + "\x00" + key }

// adminRetryJob is POST /v1/admin/jobs/{id}/retry: a failed or canceled job
// gets a new job (same type, params, tenant and requester; retry_of the old
// one), admitted once per Idempotency-Key; the old one keeps its state and
// gains retried_as. A job that failed permanently is retried only with
// ?confirm_permanent=true (else 409 permanent-failure).
func (g *Gateway) adminRetryJob(c *fiber.Ctx) error {
	key, err := idempotencyKey(c)
	if err != nil {
		return writeProblem(c, err)
	}
	confirm := false
	switch s := c.Query("confirm_permanent"); s {
	case "", "false":
	case "true":
		confirm = true
	default:
		return writeProblem(c, job.Userf(errBadQuery, "confirm_permanent must be true or false"))
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), admitTimeout+adminIndexWait)
	defer cancel()
	id := identity(c)
	old, err := g.adminFind(ctx, id, strings.Clone(c.Params("id")))
	if err != nil {
		return writeProblem(c, err)
	}
	rec, created, err := g.adminRetry(ctx, id, old, retryKey(old.ID, key), confirm, slog.LevelInfo)
	if err != nil {
		return writeProblem(c, err)
	}
	c.Set(fiber.HeaderLocation, "/v1/admin/jobs/"+rec.ID)
	v := adminView(rec, true)
	v.WaitingFor = g.waitingFor(rec)
	if !created {
		c.Set("Idempotent-Replayed", "true")
		return g.writeAdmin(c, http.StatusOK, v)
	}
	return g.writeAdmin(c, http.StatusCreated, v)
}

// adminRetry makes old's retry under the key rk (its id derived from old's
// scope and rk), or finds the one rk already made (created false); a job
// neither failed nor canceled is ErrNotRetryable, one that failed
// permanently is ErrPermanentFailure unless confirm (a replay needs no
// confirmation: the retry is made already). Both the single and the bulk
// retry come through here; lvl is the level of its log line.
func (g *Gateway) adminRetry(ctx context.Context, id auth.Identity, old *job.Record, rk string, confirm bool, lvl slog.Level) (*job.Record, bool, error) {
	newID := g.ids.Derive(old.Tenant, old.Requester, rk)
	newKey := job.StoreKey(old.Tenant, old.Requester, newID)
	if existing, err := g.jobs.Get(ctx, newKey); err == nil {
		return existing, false, g.linkRetry(ctx, old, existing)
	} else if !errors.Is(err, job.ErrNotFound) {
		return nil, false, err
	}
	if old.State != job.StateFailed && old.State != job.StateCanceled {
		return nil, false, job.Userf(job.ErrNotRetryable, "the job is %s; only a failed or canceled job can be retried", old.State)
	}
	if old.FailedPermanently() && !confirm {
		return nil, false, job.Userf(job.ErrPermanentFailure, "the job failed permanently (%s, retryable: false), so a retry will likely fail the same way; "+
			"retry with ?confirm_permanent=true to go ahead", old.Error.Category)
	}
	now := g.cfg.Now().UTC()
	rec := &job.Record{ID: newID, Tenant: old.Tenant, Requester: old.Requester, KeyHash: g.ids.KeyHash(old.Tenant, old.Requester, rk),
		Fingerprint: old.Fingerprint, Type: old.Type, Params: old.Params, State: job.StateQueued, CreatedAt: now, UpdatedAt: now,
		MaxAttempts: old.MaxAttempts, TimeoutSeconds: old.TimeoutSeconds, RetryOf: old.ID}
	if d, ok := g.types.decl(old.Type); ok {
		rec.MaxAttempts, rec.TimeoutSeconds = d.Attempts, d.TimeoutSeconds
	}
	retryFlow(old, rec, now)
	switch err := g.jobs.Create(ctx, rec); {
	case errors.Is(err, natsjs.ErrExists):
		existing, err := g.jobs.Get(ctx, newKey)
		if err != nil {
			return nil, false, err
		}
		return existing, false, g.linkRetry(ctx, old, existing)
	case err != nil:
		return nil, false, err
	}
	g.log.Log(ctx, lvl, "job retried by an admin", "job_id", rec.ID, "retry_of", old.ID, "tenant", rec.Tenant, "by", id.Requester, "operator", id.Operator,
		"permanent", old.FailedPermanently())
	if !g.cfg.LeaveWorkToRelay && rec.State != job.StateScheduled {
		// A scheduled retry has no work until its run_at: the relay adds
		// it to the scheduled set.
		if err := g.work.Publish(ctx, rec, 0); err != nil {
			g.log.Warn("work publish deferred to relay", "job_id", rec.ID, "err", err)
		}
	}
	return rec, true, g.linkRetry(ctx, old, rec)
}

// retryFlow gives an admin's retry of old its flow fields: the same
// priority; its run_at and start_by while they are still ahead at now (a
// retry before the run_at waits scheduled for it again; one past its
// start_by, say a job canceled deadline_exceeded, runs now, without it).
func retryFlow(old, rec *job.Record, now time.Time) {
	rec.Priority = old.Priority
	if old.RunAt != nil && old.RunAt.After(now) {
		t := *old.RunAt
		rec.RunAt, rec.State = &t, job.StateScheduled
	}
	if old.StartBy != nil && old.StartBy.After(now) {
		t := *old.StartBy
		rec.StartBy = &t
	}
}

// linkRetry links the old job to its retry (retried_as, the one change a
// terminal record gets: its state and times stay). A replay links it
// again, so a link lost with a crash is made then.
func (g *Gateway) linkRetry(ctx context.Context, old, rec *job.Record) error {
	if old.RetriedAs == rec.ID {
		return nil
	}
	_, err := g.jobs.Mutate(ctx, old.Key(), func(r *job.Record) error {
		r.RetriedAs = rec.ID
		return nil
	})
	return err
}

// flowCensus reads the dispatchers' flow census within flowWaitBudget;
// nil (no job counted as held back) when it cannot be read.
func (g *Gateway) flowCensus(ctx context.Context) natsjs.FlowWaiting {
	if g.slots == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, flowWaitBudget)
	defer cancel()
	w, err := g.slots.Waiting(ctx)
	if err != nil {
		g.log.Debug("flow census not read", "err", err)
		return nil
	}
	return w
}

var statsParams = map[string]bool{"tenant": true, "series": true}

// adminStats is GET /v1/admin/stats: per type, from the query index's
// counters (their cost does not grow with the jobs stored), and the jobs
// held back by flow control from the dispatchers' flow census.
func (g *Gateway) adminStats(c *fiber.Ctx) error {
	id := identity(c)
	if err := checkParams(c, statsParams, "GET /v1/admin/stats"); err != nil {
		return writeProblem(c, err)
	}
	tenant := c.Query("tenant")
	if tenant != "" && !job.ValidScopeID(tenant) {
		return writeProblem(c, job.Userf(errBadQuery, "tenant must match [A-Za-z0-9_-]{1,64}"))
	}
	series := c.Query("series")
	if series != "" && series != "minutes" {
		return writeProblem(c, job.Userf(errBadQuery, "series must be minutes"))
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), adminIndexWait+time.Second)
	defer cancel()
	x, err := g.adminIndex(ctx)
	if err != nil {
		return writeProblem(c, err)
	}
	scope := adminScope(id, strings.Clone(tenant))
	now := g.cfg.Now().UTC()
	types, err := x.Stats(scope, now)
	if err != nil {
		return writeProblem(c, err)
	}
	if types == nil {
		types = []api.TypeStats{}
	}
	run := g.types.runners(now)
	waiting := g.flowCensus(ctx)
	for i := range types {
		name := types[i].Type
		types[i].Workers, types[i].Paused, types[i].Endpoint = run.workers[name], run.paused[name], run.endpoint[name]
		for tenant, n := range waiting[name] {
			if scope == "" || tenant == scope {
				types[i].WaitingConcurrency += int64(n.Concurrency)
				types[i].RateLimited += int64(n.Rate)
			}
		}
	}
	if series != "" {
		// The last hour minute by minute, for the console's chart.
		minutes, err := x.Minutes(scope, now)
		if err != nil {
			return writeProblem(c, err)
		}
		for i := range types {
			types[i].Minutes = minutes[types[i].Type]
		}
	}
	return g.writeAdmin(c, http.StatusOK, api.Stats{Tenant: scope, At: now, Types: types})
}

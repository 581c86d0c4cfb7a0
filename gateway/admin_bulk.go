package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/canon"
	"github.com/jobgate/jobgate/internal/index"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/pkg/api"
)

// Bulk actions (POST /v1/admin/jobs/cancel, POST /v1/admin/jobs/retry):
// the filters of GET /v1/admin/jobs walk the query index newest first, each
// job is read again from the store, checked against the filters and the
// role, and changed through the single-job path (adminCancel, adminRetry:
// the same compare-and-set through the lifecycle, so a terminal job never
// moves). One call looks at most at its limit of jobs (api.MaxBulkJobs)
// and works at most Config.BulkTimeBudget; past either it answers with a
// cursor to go on from.

const (
	// bulkBatch is how many index entries one step of a bulk call reads.
	bulkBatch = 100
	// bulkParallel is how many jobs of a step a bulk call changes at once.
	bulkParallel = 8
	// maxBulkCalls is how many bulk calls one gateway works on at once;
	// past it a call is refused 429 with Retry-After.
	maxBulkCalls = 4
	// bulkGrace is how long a job change begun within the budget may take
	// past it.
	bulkGrace = admitTimeout
)

// adminBulkCancel is POST /v1/admin/jobs/cancel.
func (g *Gateway) adminBulkCancel(c *fiber.Ctx) error { return g.adminBulk(c, api.BulkCancel) }

// adminBulkRetry is POST /v1/admin/jobs/retry, with Idempotency-Key (a dry
// run may leave it out).
func (g *Gateway) adminBulkRetry(c *fiber.Ctx) error { return g.adminBulk(c, api.BulkRetry) }

// bulkCall is a bulk request as decoded.
type bulkCall struct {
	action string
	q      index.Query
	limit  int
	dryRun bool
	key    string // bulk retry: the caller's Idempotency-Key
	// confirmPermanent (bulk retry): the caller confirmed retrying jobs
	// that failed permanently; without it they are skipped.
	confirmPermanent bool
}

func (g *Gateway) adminBulk(c *fiber.Ctx, action string) error {
	id := identity(c)
	call, err := decodeBulk(c, id, action)
	if err != nil {
		return writeProblem(c, err)
	}
	if action == api.BulkRetry && (!call.dryRun || hasHeader(c, idempotencyKeyHeader)) {
		if call.key, err = idempotencyKey(c); err != nil {
			return writeProblem(c, err)
		}
	}
	slot := g.bulk
	select {
	case slot <- struct{}{}:
		defer func() { <-slot }()
	default:
		setRetryAfter(c, 2)
		return writeProblem(c, job.Userf(job.ErrRateLimited, "%d bulk calls are under way on this gateway; retry after Retry-After", maxBulkCalls))
	}
	ictx, cancel := context.WithTimeout(c.UserContext(), adminIndexWait+time.Second)
	x, err := g.adminIndex(ictx)
	cancel()
	if err != nil {
		return writeProblem(c, err)
	}
	start := time.Now()
	res, err := g.runBulk(c.UserContext(), x, id, call, start.Add(g.cfg.BulkTimeBudget))
	if err != nil {
		if errors.Is(err, index.ErrBadCursor) {
			err = &job.ValidationError{Errors: []job.FieldError{{Field: "/cursor", Rule: "format", Message: "is not a next_cursor this server gave"}}}
		}
		return writeProblem(c, err)
	}
	g.log.Info("admin bulk "+action, "by", id.Requester, "operator", id.Operator, "tenant", call.q.Tenant, "dry_run", call.dryRun,
		"matched", res.Matched, "canceled", res.Canceled, "retried", res.Retried, "replayed", res.Replayed, "permanent", res.Permanent,
		"skipped", res.Skipped, "failed", res.Failed, "truncated", res.Truncated, "took", time.Since(start).Round(time.Millisecond))
	return g.writeAdmin(c, http.StatusOK, res)
}

func hasHeader(c *fiber.Ctx, name []byte) bool {
	return c.Request().Header.PeekBytes(name) != nil
}

// runBulk walks the index entries of call's filters, newest first, a
// step of bulkBatch at a time, bulkParallel jobs at once, until the end,
// its limit, the deadline or the gateway's stop.
func (g *Gateway) runBulk(ctx context.Context, x queryIndex, id auth.Identity, call bulkCall, deadline time.Time) (api.AdminBulkResult, error) {
	res := api.AdminBulkResult{Action: call.action, DryRun: call.dryRun}
	wctx, cancel := context.WithDeadline(ctx, deadline.Add(bulkGrace))
	defer cancel()
	var mu sync.Mutex
	looked := 0
	q := call.q
	stop := func() string {
		select {
		case <-g.stopped:
			return api.TruncatedShutdown
		default:
		}
		if !time.Now().Before(deadline) {
			return api.TruncatedTime
		}
		return ""
	}
	for first := true; ; first = false {
		if why := stop(); why != "" && !first {
			res.Truncated, res.NextCursor = why, q.After
			return res, nil
		}
		q.Limit = min(bulkBatch, call.limit-looked)
		page, err := x.Page(q)
		if err != nil {
			return res, err
		}
		for i := 0; i < len(page.Entries); i += bulkParallel {
			if i > 0 {
				if why := stop(); why != "" {
					res.Truncated, res.NextCursor = why, index.CursorAfter(page.Entries[i-1])
					return res, nil
				}
			}
			chunk := page.Entries[i:min(i+bulkParallel, len(page.Entries))]
			var wg sync.WaitGroup
			for _, e := range chunk {
				wg.Go(func() {
					o := g.bulkOne(wctx, id, &call, e)
					mu.Lock()
					o.add(&res)
					mu.Unlock()
				})
			}
			wg.Wait()
			looked += len(chunk)
		}
		if page.Next == "" {
			return res, nil
		}
		q.After = page.Next
		if looked >= call.limit {
			res.Truncated, res.NextCursor = api.TruncatedLimit, page.Next
			return res, nil
		}
	}
}

// bulkOutcome is what a bulk call did to one job.
type bulkOutcome struct {
	matched bool // it still matches and the role reaches it
	did     int  // bulkCanceled ... bulkFailed
	// permanent: a retry of a job that failed permanently, made or, for
	// want of confirm_permanent, skipped.
	permanent bool
	jobID     string
	problem   string
}

const (
	bulkCanceled = 1 + iota
	bulkRetried
	bulkReplayed
	bulkSkipped
	bulkFailed
)

func (o bulkOutcome) add(r *api.AdminBulkResult) {
	if !o.matched {
		return
	}
	r.Matched++
	if o.permanent {
		r.Permanent++
	}
	switch o.did {
	case bulkCanceled:
		r.Canceled++
	case bulkRetried:
		r.Retried++
	case bulkReplayed:
		r.Replayed++
	case bulkSkipped:
		r.Skipped++
	case bulkFailed:
		r.Failed++
		if len(r.Failures) < api.MaxBulkFailures {
			r.Failures = append(r.Failures, api.BulkFailure{JobID: o.jobID, Problem: o.problem})
		}
	}
}

// bulkOne reads one job again from the store and, when it still matches
// the filters and the role reaches it, changes it through the single-job
// path.
func (g *Gateway) bulkOne(ctx context.Context, id auth.Identity, call *bulkCall, e index.Entry) bulkOutcome {
	fail := func(jobID string, err error) bulkOutcome {
		g.log.Warn("admin bulk "+call.action+": job not changed", "job_id", jobID, "err", err)
		return bulkOutcome{matched: true, did: bulkFailed, jobID: jobID, problem: problemOf(err).Type}
	}
	rec, err := g.jobs.Get(ctx, job.StoreKey(e.Tenant, e.Requester, e.ID))
	switch {
	case errors.Is(err, job.ErrNotFound):
		return bulkOutcome{} // gone since the index was written
	case err != nil:
		return fail(e.ID, err)
	}
	if !keepsRecord(&call.q, rec) || !reaches(id, rec) {
		return bulkOutcome{} // changed since the index was written
	}
	if call.action == api.BulkCancel {
		if rec.State.Terminal() {
			return bulkOutcome{matched: true, did: bulkSkipped}
		}
		if call.dryRun {
			return bulkOutcome{matched: true, did: bulkCanceled}
		}
		switch _, err := g.adminCancel(ctx, id, rec, slog.LevelDebug); {
		case errors.Is(err, job.ErrTerminal):
			return bulkOutcome{matched: true, did: bulkSkipped} // finished since the read
		case err != nil:
			return fail(rec.ID, err)
		}
		return bulkOutcome{matched: true, did: bulkCanceled}
	}
	retryable := rec.State == job.StateFailed || rec.State == job.StateCanceled
	// wouldRetry is a retry about to be made, of a job that may have
	// failed permanently: skipped then without the confirmation.
	wouldRetry := func() bulkOutcome {
		perm := rec.FailedPermanently()
		if perm && !call.confirmPermanent {
			return bulkOutcome{matched: true, did: bulkSkipped, permanent: true}
		}
		return bulkOutcome{matched: true, did: bulkRetried, permanent: perm}
	}
	if call.key == "" { // a dry run without a key: no replays to find
		if !retryable || rec.RetriedAs != "" {
			return bulkOutcome{matched: true, did: bulkSkipped}
		}
		return wouldRetry()
	}
	rk := bulkRetryKey(rec.ID, call.key)
	newID := g.ids.Derive(rec.Tenant, rec.Requester, rk)
	if rec.RetriedAs != "" && rec.RetriedAs != newID {
		return bulkOutcome{matched: true, did: bulkSkipped} // retried already, under another key
	}
	if call.dryRun {
		_, err := g.jobs.Get(ctx, job.StoreKey(rec.Tenant, rec.Requester, newID))
		switch {
		case err == nil:
			return bulkOutcome{matched: true, did: bulkReplayed}
		case !errors.Is(err, job.ErrNotFound):
			return fail(rec.ID, err)
		case !retryable:
			return bulkOutcome{matched: true, did: bulkSkipped}
		}
		return wouldRetry()
	}
	switch _, created, err := g.adminRetry(ctx, id, rec, rk, call.confirmPermanent, slog.LevelDebug); {
	case errors.Is(err, job.ErrNotRetryable):
		return bulkOutcome{matched: true, did: bulkSkipped}
	case errors.Is(err, job.ErrPermanentFailure):
		return bulkOutcome{matched: true, did: bulkSkipped, permanent: true}
	case err != nil:
		return fail(rec.ID, err)
	case created:
		return bulkOutcome{matched: true, did: bulkRetried, permanent: rec.FailedPermanently()}
	}
	return bulkOutcome{matched: true, did: bulkReplayed}
}

// bulkRetryKey is the key under which a bulk retry with the Idempotency-Key
// key admits the retry of job oldID in its scope: one per (bulk key, job),
// so the same bulk call again makes no job twice. Like retryKey it holds a
// NUL, which no client's key can; its own prefix keeps a bulk key apart
// from the same key given to a single retry.
func bulkRetryKey(oldID, key string) string { return "\x00admin-bulk-retry\x00" + oldID + "\x00" + key }

var bulkFields = map[string]bool{"tenant": true, "requester": true, "type": true, "state": true, "category": true,
	"created_after": true, "created_before": true, "limit": true, "cursor": true, "dry_run": true, "confirm_permanent": true}

var bulkFilters = []string{"tenant", "requester", "type", "state", "category", "created_after", "created_before"}

// decodeBulk reads a bulk body: one JSON object of at most maxBody bytes
// (else 413; not JSON, 400 malformed-request), whose members are those of
// api.AdminBulkRequest, each checked (else 422 validation naming each
// field), naming at least one filter. A tenant admin may name only its own
// tenant (else 403).
func decodeBulk(c *fiber.Ctx, id auth.Identity, action string) (bulkCall, error) {
	call := bulkCall{action: action, limit: api.MaxBulkJobs}
	body := c.BodyRaw() // never Body: see refuseContentCoding
	if len(body) > maxBody {
		return call, job.ErrPayloadTooLarge
	}
	if ct := c.Get(fiber.HeaderContentType); ct != "" && ct != fiber.MIMEApplicationJSON {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return call, job.Userf(errUnsupportedMedia, "send the body as application/json")
		}
	}
	v, err := canon.DecodeStrict(body)
	if err != nil {
		return call, err
	}
	top, ok := v.(map[string]any)
	if !ok {
		return call, job.Userf(job.ErrMalformed, "body must be a JSON object")
	}
	var fe []job.FieldError
	bad := func(name, rule, msg string) {
		fe = append(fe, job.FieldError{Field: "/" + canon.EscapePointerToken(name), Rule: rule, Message: msg})
	}
	str := func(name string) (string, bool) {
		raw, present := top[name]
		if !present {
			return "", false
		}
		s, ok := raw.(string)
		if !ok {
			bad(name, "type", "must be a string")
			return "", false
		}
		return strings.Clone(s), true
	}
	for k := range top {
		if !bulkFields[k] {
			if len(k) > 32 {
				k = strings.ToValidUTF8(k[:32], "") + "..."
			}
			bad(k, "additionalProperties", "is not allowed")
		}
	}
	q := &call.q
	tenant, hasTenant := str("tenant")
	if hasTenant && !job.ValidScopeID(tenant) {
		bad("tenant", "pattern", "must match [A-Za-z0-9_-]{1,64}")
	}
	if s, ok := str("requester"); ok {
		if !job.ValidScopeID(s) {
			bad("requester", "pattern", "must match [A-Za-z0-9_-]{1,64}")
		}
		q.Requester = s
	}
	if s, ok := str("type"); ok {
		if !job.ValidTypeName(s) {
			bad("type", "pattern", "must be a job type name ([a-z][a-z0-9_]{0,63})")
		}
		q.Type = s
	}
	if s, ok := str("state"); ok {
		if q.State = job.State(s); !q.State.Valid() {
			bad("state", "enum", "must be queued, running, succeeded, failed or canceled")
		}
	}
	if s, ok := str("category"); ok {
		if !categories[s] {
			bad("category", "enum", categoryHint)
		}
		q.Category = s
	}
	for _, name := range []string{"created_after", "created_before"} {
		if s, ok := str(name); ok {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil || len(s) > 40 {
				bad(name, "format", "must be an RFC 3339 time")
			}
			if name == "created_after" {
				q.CreatedAfter = t
			} else {
				q.CreatedBefore = t
			}
		}
	}
	if raw, present := top["limit"]; present {
		n, ok := raw.(json.Number)
		i, err := n.Int64()
		if !ok || err != nil || i < 1 || i > api.MaxBulkJobs {
			bad("limit", "maximum", fmt.Sprintf("must be an integer from 1 to %d", api.MaxBulkJobs))
		} else {
			call.limit = int(i)
		}
	}
	if s, ok := str("cursor"); ok {
		if s == "" || len(s) > api.MaxAdminCursorLen {
			bad("cursor", "format", "is not a next_cursor this server gave")
		}
		q.After = s
	}
	if raw, present := top["dry_run"]; present {
		b, ok := raw.(bool)
		if !ok {
			bad("dry_run", "type", "must be a boolean")
		}
		call.dryRun = b
	}
	if raw, present := top["confirm_permanent"]; present {
		b, ok := raw.(bool)
		if !ok {
			bad("confirm_permanent", "type", "must be a boolean")
		}
		if action != api.BulkRetry {
			bad("confirm_permanent", "additionalProperties", "is for a bulk retry only")
		}
		call.confirmPermanent = b
	}
	named := false
	for _, f := range bulkFilters {
		if _, ok := top[f]; ok {
			named = true
		}
	}
	if !named && len(fe) == 0 {
		fe = append(fe, job.FieldError{Field: "", Rule: "minProperties",
			Message: "name at least one filter (tenant, requester, type, state, category, created_after or created_before): a bulk call never means every job by default"})
	}
	if len(fe) > 0 {
		return call, &job.ValidationError{Errors: fe}
	}
	if hasTenant && !id.Operator && tenant != id.Tenant {
		return call, job.Userf(job.ErrForbidden, "a tenant admin reaches only its own tenant: leave tenant out, or name %q", id.Tenant)
	}
	q.Tenant = adminScope(id, tenant)
	return call, nil
}

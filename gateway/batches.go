package gateway

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/failpoint"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// batchRecords is what the gateway needs of the batch record store
// (natsjs.BatchStore). Errors wrap job.ErrNotFound, job.ErrUnavailable,
// job.ErrPayloadTooLarge (a record past job.MaxBatchRecord) and
// natsjs.ErrExists.
type batchRecords interface {
	Create(ctx context.Context, b *job.BatchRecord) error
	Get(ctx context.Context, key string) (*job.BatchRecord, error)
	MarkAdmitted(ctx context.Context, b *job.BatchRecord, now time.Time) error
}

// batchAdmitTimeout bounds the JetStream calls of one batch admission: the
// commit and up to job.MaxBatchItems item creates (natsjs.AdmitItems, 16
// at a time). Past it the batch is committed or not; a committed one's
// items are created by the relay, and a retry with the key replays it.
const batchAdmitTimeout = 20 * time.Second

// batchRoutes registers the batch endpoints (docs/api.md, "Batches").
func (g *Gateway) batchRoutes(v1 fiber.Router) {
	v1.Post("/batches", g.submitBatch)
	v1.Get("/batches/:id", g.readLimit, g.getBatch)
	v1.Get("/batches/:id/events", g.readLimit, g.batchEvents)
	v1.Delete("/batches/:id", g.cancelLimit, g.cancelBatch)
	v1.Get("/events", g.readLimit, g.requesterEvents)
}

// submitBatch is POST /v1/batches: validate every item, then commit the
// batch record create-only in one write, then create its items' job
// records create-only (the relay does it for a gateway that died first).
func (g *Gateway) submitBatch(c *fiber.Ctx) error {
	// The admission span continues the caller's trace like POST /v1/jobs;
	// the batch record keeps its context, and each item's record with it
	// (job.BatchRecord.ItemRecord), so every item's later steps are its
	// children whoever creates the item's record.
	sctx, span := startAdmissionSpan(c)
	defer endSpan(span, c)
	c.SetUserContext(sctx)
	id := identity(c)
	span.SetAttributes(attribute.String("jobgate.tenant", id.Tenant))
	if wait, ok := g.submits.allowScope(id.Tenant, id.Requester); !ok {
		setRetryAfter(c, wait)
		return writeProblem(c, job.ErrRateLimited)
	}
	body := c.BodyRaw() // never Body: see submit
	if len(body) > job.MaxBatchBody {
		return writeProblem(c, job.Userf(job.ErrPayloadTooLarge, "a batch body must be at most 1 MiB"))
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return writeProblem(c, err)
	}
	if ct := c.Get(fiber.HeaderContentType); ct != "" && ct != fiber.MIMEApplicationJSON {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return writeProblem(c, fmt.Errorf("%w: got %q", errUnsupportedMedia, ct))
		}
	}
	// Every item is validated before anything is written: one bad item
	// answers 422 and leaves the key unused.
	req, err := job.DecodeBatch(body, g.types.schemas)
	if err == nil {
		err = g.checkBatchSchedule(req)
	}
	if err != nil {
		return writeProblem(c, err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), batchAdmitTimeout)
	defer cancel()
	batchID := g.ids.DeriveBatch(id.Tenant, id.Requester, key)
	now := g.cfg.Now().UTC()
	b := &job.BatchRecord{
		ID: batchID, Tenant: id.Tenant, Requester: id.Requester, KeyHash: g.ids.KeyHash(id.Tenant, id.Requester, key),
		Fingerprint: req.Fingerprint, Notify: req.Notify, CreatedAt: now, Items: make([]job.BatchItem, len(req.Items)),
	}
	b.Trace, b.TraceState = tracing.Inject(ctx) // the admission span's
	if span.IsRecording() {
		span.SetAttributes(attribute.String("jobgate.batch.id", batchID), attribute.Int("jobgate.batch.jobs", len(b.Items)))
	}
	for i, r := range req.Items {
		it := job.BatchItem{JobID: g.ids.DeriveItem(id.Tenant, id.Requester, batchID, i), Type: r.Type, Params: r.Params, Fingerprint: r.Fingerprint,
			RunAt: r.Flow.RunAtFrom(now), Priority: r.Flow.Priority, StartBy: r.Flow.StartBy}
		// Each job keeps the limits its type had when the batch was accepted.
		if d, ok := g.types.decl(r.Type); ok {
			it.MaxAttempts, it.TimeoutSeconds = d.Attempts, d.TimeoutSeconds
		}
		b.Items[i] = it
	}
	if full := g.storage.room(ctx, id.Tenant); full != nil {
		// A key already taken still answers with its batch.
		existing, err := g.batches.Get(ctx, b.Key())
		if err == nil {
			return g.replayBatch(c, ctx, b, existing)
		}
		if !errors.Is(err, job.ErrNotFound) {
			return writeProblem(c, err)
		}
		if errors.Is(full, errTenantResultsFull) {
			g.cfg.Metrics.TenantResultsFull("admission")
		}
		return writeProblem(c, full)
	}
	for range 3 {
		err := g.batches.Create(ctx, b)
		if err == nil {
			return g.admittedBatch(c, ctx, b)
		}
		if !errors.Is(err, natsjs.ErrExists) {
			endAdmissionSpan(span, c, "unavailable", err)
			if !errors.Is(err, job.ErrPayloadTooLarge) {
				g.log.WarnContext(ctx, "batch admission failed", "tenant", id.Tenant, "key_hash", b.KeyHash, "err", err)
			}
			return writeProblem(c, err)
		}
		// Taken: a concurrent duplicate, an earlier attempt, or our own
		// create whose ack was lost. The fingerprint tells them apart.
		existing, err := g.batches.Get(ctx, b.Key())
		if errors.Is(err, job.ErrNotFound) {
			continue // expired between the two calls
		}
		if err != nil {
			return writeProblem(c, err)
		}
		return g.replayBatch(c, ctx, b, existing)
	}
	return writeProblem(c, fmt.Errorf("%w: batch admission did not settle", job.ErrUnavailable))
}

// admittedBatch follows this gateway's commit of b: its items' records,
// then 202. A failed item create is left to the relay, which admits every
// item of a committed batch (docs/reliability.md, "Batches").
func (g *Gateway) admittedBatch(c *fiber.Ctx, ctx context.Context, b *job.BatchRecord) error {
	if err := g.cfg.Failpoints.Hit(failpoint.GatewayBatchAfterCommit); err != nil {
		return writeProblem(c, err)
	}
	endAdmissionSpan(trace.SpanFromContext(ctx), c, "new", nil)
	if err := g.admitItems(ctx, b); err != nil {
		g.log.WarnContext(ctx, "batch items left to the relay", "batch_id", b.ID, "err", err)
	}
	g.log.InfoContext(ctx, "batch admitted", "batch_id", b.ID, "tenant", b.Tenant, "key_hash", b.KeyHash, "jobs", len(b.Items))
	c.Set(fiber.HeaderLocation, job.BatchPath(b.ID))
	v := newBatchView(b)
	return g.writeBatch(c, http.StatusAccepted, v, 0, job.MaxBatchItems)
}

// replayBatch answers a request whose key already has batch existing: 409
// for other jobs, else 200 with the batch as it is now (its items admitted
// first, if no one has yet).
func (g *Gateway) replayBatch(c *fiber.Ctx, ctx context.Context, b, existing *job.BatchRecord) error {
	if existing.Fingerprint != b.Fingerprint {
		endAdmissionSpan(trace.SpanFromContext(ctx), c, "conflict", nil)
		return writeProblem(c, job.Userf(job.ErrKeyReused, "this Idempotency-Key was already used for batch %s with other jobs", existing.ID))
	}
	if existing.AdmittedAt == nil {
		if err := g.admitItems(ctx, existing); err != nil {
			return writeProblem(c, err)
		}
	}
	v, err := g.readBatchView(ctx, existing)
	if err != nil {
		return writeProblem(c, err)
	}
	c.Set(fiber.HeaderLocation, job.BatchPath(existing.ID))
	c.Set("Idempotent-Replayed", "true")
	endAdmissionSpan(trace.SpanFromContext(ctx), c, "replayed", nil)
	return g.writeBatch(c, http.StatusOK, v, 0, job.MaxBatchItems)
}

// admitItems creates every item's record of b that does not exist yet and
// marks b admitted.
func (g *Gateway) admitItems(ctx context.Context, b *job.BatchRecord) error {
	if _, err := natsjs.AdmitItems(ctx, g.jobs, b, nil); err != nil {
		return err
	}
	return g.batches.MarkAdmitted(ctx, b, g.cfg.Now())
}

// lookupBatch reads a batch of the caller's own: another requester's
// answers exactly like one that does not exist (404).
func (g *Gateway) lookupBatch(ctx context.Context, c *fiber.Ctx) (*job.BatchRecord, error) {
	batchID := strings.Clone(c.Params("id"))
	if !job.ValidBatchID(batchID) {
		return nil, job.Userf(job.ErrNotFound, "no such batch is visible to this token")
	}
	id := identity(c)
	b, err := g.batches.Get(ctx, job.StoreKey(id.Tenant, id.Requester, batchID))
	if errors.Is(err, job.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", job.Userf(job.ErrNotFound, "no such batch is visible to this token"), err)
	}
	return b, err
}

// getBatch is GET /v1/batches/{id}: counts, progress, done and a page of
// its jobs; ETag/If-None-Match → 304 and ?wait= long-poll as for a job.
func (g *Gateway) getBatch(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), readTimeout)
	defer cancel()
	b, err := g.lookupBatch(ctx, c)
	if err != nil {
		return writeProblem(c, err)
	}
	offset, limit, err := batchPage(c, len(b.Items))
	if err != nil {
		return writeProblem(c, err)
	}
	wait, err := waitParam(c.Query("wait"))
	if err != nil {
		return writeProblem(c, err)
	}
	inm := c.Get(fiber.HeaderIfNoneMatch)
	var v *batchView
	if wait > 0 && inm != "" {
		tenant, who := tenantOf(c), requesterOf(c)
		if full := g.polls.acquire(tenant, who); full != "" {
			return g.polls.refuse(c, full)
		}
		v, err = g.waitBatch(c.UserContext(), b, inm, min(wait, g.cfg.MaxWait))
		g.polls.release(tenant, who)
	} else {
		v, err = g.readBatchView(ctx, b)
	}
	if err != nil {
		return writeProblem(c, err)
	}
	if inm != "" && tagMatches(inm, v.etag()) {
		c.Set(fiber.HeaderETag, v.etag())
		c.Set(fiber.HeaderCacheControl, "private, no-store")
		if !v.done() {
			setRetryAfter(c, batchRetryAfter(b, g.cfg.Now()))
		}
		return c.SendStatus(http.StatusNotModified)
	}
	return g.writeBatch(c, http.StatusOK, v, offset, limit)
}

// waitBatch answers once the batch's view differs from the one whose ETag
// the client has, or after wait.
func (g *Gateway) waitBatch(ctx context.Context, b *job.BatchRecord, inm string, wait time.Duration) (*batchView, error) {
	w, err := g.watchBatch(b)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	v, err := g.readBatchView(rctx, b) // after the watch is in place: no change is missed
	cancel()
	if err != nil || !tagMatches(inm, v.etag()) || v.done() {
		return v, err
	}
	v.indexed()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		rec, ok := w.next(ctx, timer.C, g.stopped)
		if !ok {
			return v, nil
		}
		if v.apply(rec) && !tagMatches(inm, v.etag()) {
			return v, nil
		}
	}
}

// cancelBatch is DELETE /v1/batches/{id}: every item not yet terminal is
// canceled (202 with the batch); a batch whose every item had ended
// already answers 409 job-terminal, like a finished job.
func (g *Gateway) cancelBatch(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), batchAdmitTimeout)
	defer cancel()
	b, err := g.lookupBatch(ctx, c)
	if err != nil {
		return writeProblem(c, err)
	}
	// Every item exists before the cancel sweep: none is created queued
	// after it.
	if b.AdmittedAt == nil {
		if err := g.admitItems(ctx, b); err != nil {
			return writeProblem(c, err)
		}
	}
	v, err := g.readBatchView(ctx, b)
	if err != nil {
		return writeProblem(c, err)
	}
	if v.done() {
		return writeProblem(c, job.Userf(job.ErrTerminal, "every job of the batch has already finished"))
	}
	now := g.cfg.Now()
	err = forEachItem(ctx, len(b.Items), func(ctx context.Context, i int) error {
		if v.states[i].Terminal() {
			return nil
		}
		updated, err := g.jobs.Mutate(ctx, job.StoreKey(b.Tenant, b.Requester, b.Items[i].JobID), func(r *job.Record) error {
			if r.State.Terminal() {
				return job.ErrTerminal
			}
			return r.Cancel(now)
		})
		if errors.Is(err, job.ErrTerminal) {
			return nil // ended meanwhile
		}
		if err != nil {
			return err
		}
		if _, err := g.events.Publish(ctx, updated); err != nil {
			g.log.Warn("cancel event left to the relay", "job_id", updated.ID, "err", err)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, natsjs.ErrStale) {
			err = fmt.Errorf("%w: %w", job.ErrUnavailable, err)
		}
		return writeProblem(c, err)
	}
	g.log.Info("batch canceled", "batch_id", b.ID, "tenant", b.Tenant)
	if v, err = g.readBatchView(ctx, b); err != nil {
		return writeProblem(c, err)
	}
	return g.writeBatch(c, http.StatusAccepted, v, 0, job.MaxBatchItems)
}

// batchRetryAfter grows with the batch's age like a job's (retryAfter).
func batchRetryAfter(b *job.BatchRecord, now time.Time) int {
	return retryAfter(&job.Record{CreatedAt: b.CreatedAt}, now)
}

func tagMatches(header, tag string) bool {
	for part := range strings.SplitSeq(header, ",") {
		p := strings.TrimPrefix(strings.TrimSpace(part), "W/")
		if p == tag || p == "*" {
			return true
		}
	}
	return false
}

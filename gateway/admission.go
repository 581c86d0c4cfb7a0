package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jobgate/jobgate/internal/codec"
	"github.com/jobgate/jobgate/internal/failpoint"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// admitTimeout bounds the JetStream calls of one admission; past it the
// client gets 503 and retries with the same key. It starts after the
// params are validated: validation is bounded on its own (a submission
// whose validation would cost more than schema.MaxValidationCost answers
// 422, without being validated), and a slow validation must never turn
// into a 503 whose retry pays for it again.
const admitTimeout = 5 * time.Second

// submit is POST /v1/jobs: admit a request exactly once per idempotency key.
func (g *Gateway) submit(c *fiber.Ctx) error {
	// The admission span continues the caller's trace (traceparent,
	// tracestate); the job keeps its context (admit), so every later step
	// of the job is its child.
	sctx, span := startAdmissionSpan(c)
	defer endSpan(span, c)
	c.SetUserContext(sctx)
	id := identity(c)
	span.SetAttributes(attribute.String("jobgate.tenant", id.Tenant))
	if wait, ok := g.submits.allowScope(id.Tenant, id.Requester); !ok {
		setRetryAfter(c, wait)
		return writeProblem(c, job.ErrRateLimited)
	}
	// BodyRaw, never Body: Body decodes Content-Encoding layers without a
	// limit (refuseContentCoding turns those away before this handler).
	body := c.BodyRaw()
	if len(body) > maxBody {
		return writeProblem(c, job.ErrPayloadTooLarge)
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return writeProblem(c, err)
	}
	if ct := c.Get(fiber.HeaderContentType); ct != "" && ct != fiber.MIMEApplicationJSON {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || (mt != "application/json" && mt != "application/problem+json") {
			return writeProblem(c, fmt.Errorf("%w: got %q", errUnsupportedMedia, ct))
		}
	}
	jobID := g.ids.Derive(id.Tenant, id.Requester, key)
	storeKey := job.StoreKey(id.Tenant, id.Requester, jobID)
	// Read before the decode; see bodyProof.
	gen := g.types.gen.Load()
	// A retry of a body this gateway has decoded for this key answers from
	// one read: no decode, schema validation or canonical form.
	var existing *job.Record
	if proof, ok := g.seen.lookup(storeKey); ok && proof != (bodyProof{}) {
		start := time.Now()
		rctx, cancel := context.WithTimeout(c.UserContext(), admitTimeout)
		rec, err := g.jobs.Get(rctx, storeKey)
		cancel()
		if err == nil {
			if makeProof(gen, rec.Fingerprint, body) == proof {
				return g.replied(c, rec, start)
			}
			existing = rec // another body: the full path judges it against this record
		}
		// Not found (expired) or unavailable: the full path decides.
	}
	// Validation comes before any store write: a rejected request leaves
	// the key unused, so the corrected request can reuse it. It also comes
	// before the admission's timeout starts (see admitTimeout).
	req, err := job.DecodeSubmission(body, g.types.schemas)
	if err == nil {
		err = req.Flow.CheckSchedule(g.cfg.Now(), g.scheduleAhead())
	}
	if err != nil {
		g.cfg.Metrics.Admission("invalid", 0)
		endAdmissionSpan(span, c, "invalid", nil)
		return writeProblem(c, err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), admitTimeout)
	defer cancel()
	start := time.Now()
	rec, created, err := g.admit(ctx, admission{
		tenant: id.Tenant, requester: id.Requester, key: key, jobID: jobID, storeKey: storeKey,
		req: req, proof: makeProof(gen, req.Fingerprint, body), existing: existing,
	})
	if err != nil {
		switch {
		case errors.Is(err, job.ErrKeyReused):
			g.cfg.Metrics.Admission("conflict", 0)
			endAdmissionSpan(span, c, "conflict", nil)
		case errors.Is(err, job.ErrStorageFull):
			g.cfg.Metrics.Admission("storage_full", 0)
			if errors.Is(err, errTenantResultsFull) {
				g.cfg.Metrics.TenantResultsFull("admission")
			}
			endAdmissionSpan(span, c, "storage_full", err)
			g.log.WarnContext(ctx, "admission refused: storage full", "tenant", id.Tenant, "err", err)
		default:
			g.cfg.Metrics.Admission("unavailable", 0)
			endAdmissionSpan(span, c, "unavailable", err)
			g.log.WarnContext(ctx, "admission failed", "tenant", id.Tenant, "key_hash", g.ids.KeyHash(id.Tenant, id.Requester, key), "err", err)
		}
		return writeProblem(c, err)
	}
	if !created {
		return g.replied(c, rec, start)
	}
	setLocation(c, rec.ID)
	g.cfg.Metrics.Admission("new", time.Since(start))
	jobSpanAttrs(span, rec)
	endAdmissionSpan(span, c, "new", nil)
	// Debug, not info: at thousands of admissions a second one line
	// each costs a few per cent of the CPU (docs/performance.md);
	// jobgate_admissions_total counts them.
	g.log.DebugContext(ctx, "job admitted", "job_id", rec.ID, "tenant", rec.Tenant, "key_hash", rec.KeyHash, "type", rec.Type)
	return g.writeJob(c, http.StatusAccepted, rec)
}

// replied answers a replay: 200 with the job as it is now.
func (g *Gateway) replied(c *fiber.Ctx, rec *job.Record, start time.Time) error {
	g.cfg.Metrics.Admission("replayed", time.Since(start))
	span := trace.SpanFromContext(c.UserContext())
	jobSpanAttrs(span, rec)
	endAdmissionSpan(span, c, "replayed", nil)
	setLocation(c, rec.ID)
	c.Set("Idempotent-Replayed", "true")
	return g.writeJob(c, http.StatusOK, rec)
}

var idempotencyKeyHeader = []byte("Idempotency-Key")

// idempotencyKey reads the one Idempotency-Key header of the request.
func idempotencyKey(c *fiber.Ctx) (string, error) {
	var val []byte
	n := 0
	c.Request().Header.VisitAll(func(k, v []byte) {
		if bytes.EqualFold(k, idempotencyKeyHeader) { // no per-header allocation
			val = v
			n++
		}
	})
	switch {
	case n == 0:
		return "", job.ErrKeyMissing
	case n > 1:
		return "", fmt.Errorf("%w: send exactly one Idempotency-Key header", job.ErrKeyInvalid)
	}
	key := string(val)
	if !job.ValidKey(key) {
		return "", fmt.Errorf("%w: must be 1-255 printable ASCII characters", job.ErrKeyInvalid)
	}
	return key, nil
}

// admission is one validated submission on its way into the store.
type admission struct {
	tenant, requester, key string
	jobID, storeKey        string
	req                    *job.Request
	proof                  bodyProof   // of the request's body, kept with the key
	existing               *job.Record // the record under the key, when already read
}

// admit commits the job record create-only and publishes its work message.
// It returns the record and whether this call created it. A replay writes
// nothing: one read when this gateway has seen the key, else one rejected
// create and one read.
func (g *Gateway) admit(ctx context.Context, a admission) (*job.Record, bool, error) {
	if a.existing != nil {
		return g.replay(a, a.existing)
	}
	if g.seen.has(a.storeKey) {
		rec, err := g.jobs.Get(ctx, a.storeKey)
		if err == nil {
			return g.replay(a, rec)
		}
		if !errors.Is(err, job.ErrNotFound) { // expired records fall through to a new job
			return nil, false, err
		}
	}
	req := a.req
	now := g.cfg.Now().UTC()
	rec := &job.Record{
		ID: a.jobID, Tenant: a.tenant, Requester: a.requester, KeyHash: g.ids.KeyHash(a.tenant, a.requester, a.key),
		Fingerprint: req.Fingerprint, Type: req.Type, Params: req.Params,
		State: job.StateQueued, CreatedAt: now, UpdatedAt: now,
	}
	req.Flow.Apply(rec)                             // scheduled when its run_at is ahead
	rec.Trace, rec.TraceState = tracing.Inject(ctx) // the admission span's
	// The job keeps the limits its type had when it was accepted.
	if d, ok := g.types.decl(req.Type); ok {
		rec.MaxAttempts, rec.TimeoutSeconds = d.Attempts, d.TimeoutSeconds
	}
	if full := g.storage.room(ctx, a.tenant); full != nil {
		// No room for a new job, but a key already taken still answers
		// with its job: a replay writes nothing.
		existing, err := g.jobs.Get(ctx, a.storeKey)
		if err == nil {
			return g.replay(a, existing)
		}
		if !errors.Is(err, job.ErrNotFound) {
			return nil, false, err
		}
		return nil, false, full
	}
	if g.cfg.Failpoints.Hit(failpoint.GatewayAdmitUnchecked) != nil {
		return g.admitUnchecked(ctx, a, rec) // a planted bug, for the chaos checker's test
	}
	for range 3 {
		err := g.jobs.Create(ctx, rec)
		if err == nil {
			g.seen.add(a.storeKey, a.proof)
			if err := g.cfg.Failpoints.Hit(failpoint.GatewayAfterCommit); err != nil {
				return nil, false, err
			}
			// The commit is what counts. If this publish is lost the
			// dispatcher's relay publishes the same message from the change
			// log, so the client still gets its 202.
			if g.cfg.LeaveWorkToRelay || rec.State == job.StateScheduled {
				// A scheduled job has no work until its run_at: the relay
				// adds it to the scheduled set.
				return rec, true, nil
			}
			if err := g.work.Publish(ctx, rec, 0); err != nil {
				g.log.WarnContext(ctx, "work publish deferred to relay", "job_id", rec.ID, "err", err)
			}
			return rec, true, nil
		}
		if !errors.Is(err, natsjs.ErrExists) {
			return nil, false, err
		}
		// Taken: a concurrent duplicate, an earlier attempt, or our own
		// create whose ack was lost. The fingerprint tells them apart.
		existing, err := g.jobs.Get(ctx, a.storeKey)
		if errors.Is(err, job.ErrNotFound) {
			continue // expired between the two calls; create again
		}
		if err != nil {
			return nil, false, err
		}
		return g.replay(a, existing)
	}
	return nil, false, fmt.Errorf("%w: admission did not settle", job.ErrUnavailable)
}

// replay judges a submission against the record its key already has, and
// remembers the key; with this body's proof when the payloads agree, so a
// byte-identical retry of it answers from one read.
func (g *Gateway) replay(a admission, existing *job.Record) (*job.Record, bool, error) {
	if existing.Fingerprint != a.req.Fingerprint {
		g.seen.mark(a.storeKey) // the proof of the job's own body stays
		return nil, false, &job.ConflictError{JobID: existing.ID}
	}
	g.seen.add(a.storeKey, a.proof)
	return existing, false, nil
}

// writeJob renders a job resource with its caching headers.
func (g *Gateway) writeJob(c *fiber.Ctx, status int, rec *job.Record) error {
	var tag [22]byte // a quoted uint64
	c.Response().Header.SetBytesV(fiber.HeaderETag, appendETag(tag[:0], rec))
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	if !rec.State.Terminal() {
		setRetryAfter(c, retryAfter(rec, g.cfg.Now()))
	}
	buf := bodyPool.Get().(*[]byte)
	*buf = g.appendResource((*buf)[:0], rec)
	c.Status(status)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	// Write copies into the response's own (pooled) buffer; Send would
	// keep a reference to ours.
	c.Response().ResetBody()
	_, err := c.Write(*buf)
	bodyPool.Put(buf)
	return err
}

// bodyPool holds response body buffers, so the hot paths encode without
// allocating.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// resource builds the public view with a freshly signed result link.
func (g *Gateway) resource(rec *job.Record) *job.Resource {
	href, exp := g.resultLink(rec)
	return rec.Resource(href, exp)
}

// appendResource writes the same view as resource, encoded, to b.
func (g *Gateway) appendResource(b []byte, rec *job.Record) []byte {
	href, exp := g.resultLink(rec)
	return codec.AppendRecordResource(b, rec, href, exp)
}

// resultLink signs a fresh result link for a succeeded job.
func (g *Gateway) resultLink(rec *job.Record) (string, time.Time) {
	if rec.State == job.StateSucceeded && rec.Output != nil {
		return g.signer.sign(rec.Tenant, rec.Requester, rec.ID, rec.Output.Object)
	}
	return "", time.Time{}
}

// etag follows the stored record (its revision), not the signed href, so an
// unchanged succeeded job still answers 304.
func etag(rec *job.Record) string {
	var tag [22]byte
	return string(appendETag(tag[:0], rec))
}

func appendETag(b []byte, rec *job.Record) []byte {
	return append(strconv.AppendUint(append(b, '"'), rec.Revision, 10), '"')
}

// setLocation sets Location: /v1/jobs/{id} without building the string.
func setLocation(c *fiber.Ctx, id string) {
	var path [64]byte
	c.Response().Header.SetBytesV(fiber.HeaderLocation, append(append(path[:0], "/v1/jobs/"...), id...))
}

// retryAfter grows with the job's age so naive pollers slow down by
// themselves: 1s for a fresh job, +1s per 10s of age, at most 30s; a
// scheduled job's is the time to its run_at, within the same bounds.
func retryAfter(rec *job.Record, now time.Time) int {
	if rec.State == job.StateScheduled && rec.RunAt != nil {
		// Nothing happens before the run_at: come back then (at most 30s).
		return max(1, min(30, int(rec.RunAt.Sub(now).Seconds())+1))
	}
	age := now.Sub(rec.CreatedAt)
	s := int(age/(10*time.Second)) + 1
	return max(1, min(30, s))
}

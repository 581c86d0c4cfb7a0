package broker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jobgate/jobgate/internal/job"
	"hash"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/tracing"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// errTooLarge: an upload outgrew its type's limit.
var errTooLarge = errors.New("result larger than the type's limit")

// errOverQuota: an upload would take its tenant past its result quota.
var errOverQuota = errors.New("result past its tenant's result quota")

// upload is one result streamed from a worker into the result store: the
// worker sends its chunks, in order, to this broker's own subject for it,
// and each chunk is answered once the store took it.
type upload struct {
	b      *Broker
	cred   string
	typ    string
	held   wire.Held // the job and claim the upload is for
	tenant string    // the job's: the result counts against its quota
	id     string
	object string
	max    int64
	sub    *nats.Subscription

	mu  sync.Mutex
	pw  *io.PipeWriter
	h   hash.Hash
	n   int64
	seq int
	// reserved is what the upload holds of its tenant's quota (b.quota):
	// every chunk taken, reserved before it is.
	reserved int64
	timer    *time.Timer
	ended    bool
	done     chan struct{}
	size     int64
	putErr   error
	// ctx is the upload's span's (a child of its attempt's span, in the
	// job's trace), for its log lines; span ends with the upload.
	ctx  context.Context
	span trace.Span
}

// open starts the upload of a held job's result on this broker.
func (b *Broker) open(ctx context.Context, r *request) *wire.Reply {
	var req wire.Held
	h, bad := b.decodeHeld(ctx, r, &req, &req, false)
	if bad != nil {
		return bad
	}
	var raw [9]byte
	_, _ = rand.Read(raw[:])
	u := &upload{b: b, cred: r.cred, typ: r.typ, held: req, tenant: h.rec.Tenant, id: hex.EncodeToString(raw[:]),
		object: objectName(h.rec), max: h.decl.MaxResultBytes, h: sha256.New(), done: make(chan struct{})}
	b.mu.Lock()
	if len(b.uploads) >= b.cfg.MaxUploads {
		b.mu.Unlock()
		return refuse(wire.CodeUnavailable, "too many uploads under way: try again")
	}
	mine := 0
	for _, o := range b.uploads {
		if o.cred == r.cred {
			mine++
		}
	}
	if mine >= b.cfg.MaxUploadsPer {
		b.mu.Unlock()
		return refuse(wire.CodeThrottled, "this credential has %d uploads under way", mine)
	}
	b.uploads[u.id] = u
	b.mu.Unlock()
	pr, pw := io.Pipe()
	u.pw = pw
	sub, err := b.nc.Subscribe(wire.UploadSubject(r.cred, r.typ, b.cfg.Host, u.id), u.chunk)
	if err != nil {
		b.forgetUpload(u.id)
		return refuse(wire.CodeUnavailable, "upload not opened")
	}
	// The upload is a span of the job's trace, a child of the attempt's
	// (the id its worker was handed at the claim), from open to stored.
	actx := trace.ContextWithRemoteSpanContext(context.WithoutCancel(b.ctx),
		tracing.AttemptContext(h.rec.Trace, h.rec.TraceState, h.rec.Key(), h.rec.Attempt))
	uctx, span := tracing.Tracer().Start(actx, "result upload", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("jobgate.job.id", h.rec.ID), attribute.String("jobgate.job.type", h.rec.Type),
		attribute.String("jobgate.tenant", h.rec.Tenant), attribute.Int("jobgate.attempt", h.rec.Attempt),
		attribute.Int64("jobgate.result.max_bytes", u.max)))
	u.mu.Lock()
	u.sub, u.ctx, u.span = sub, uctx, span
	u.mu.Unlock()
	_ = sub.SetPendingLimits(4, 4*wire.ChunkSize+4096)
	u.timer = time.AfterFunc(b.cfg.UploadIdle, func() { u.abort(errors.New("upload idle")) })
	desc := fmt.Sprintf("%s result of job %s, attempt %d", h.rec.Type, h.rec.ID, h.rec.Attempt)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer close(u.done)
		size, err := b.stores.PutResult(trace.ContextWithSpan(b.ctx, span),
			natsjs.ResultObject{Name: u.object, Tenant: u.tenant, ContentType: h.decl.ContentType, Description: desc}, pr)
		pr.CloseWithError(errOr(err, io.ErrClosedPipe))
		u.mu.Lock()
		u.size, u.putErr = size, err
		u.mu.Unlock()
	}()
	if err := b.nc.FlushTimeout(opTimeout); err != nil {
		u.abort(err)
		return refuse(wire.CodeUnavailable, "upload not opened")
	}
	return &wire.Reply{Upload: &wire.UploadTarget{Host: b.cfg.Host, ID: u.id, Object: u.object}}
}

func errOr(err, def error) error {
	if err == nil {
		return def
	}
	return err
}

// chunk takes one chunk. Its subscription delivers them one at a time, in
// order; a chunk out of order, or past the limit, ends the upload.
func (u *upload) chunk(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	seq, err := strconv.Atoi(m.Header.Get(wire.HeaderSeq))
	last := m.Header.Get(wire.HeaderLast) != ""
	u.mu.Lock()
	if u.ended {
		u.mu.Unlock()
		respond(m, refuse(wire.CodeUnknown, "no such upload"))
		return
	}
	switch {
	case err != nil || seq != u.seq:
		u.mu.Unlock()
		u.abort(errors.New("chunk out of order"))
		respond(m, refuse(wire.CodeBadRequest, "chunk %q out of order: %d expected", m.Header.Get(wire.HeaderSeq), u.seq))
		return
	case len(m.Data) > wire.ChunkSize:
		u.mu.Unlock()
		u.abort(errors.New("chunk too large"))
		respond(m, refuse(wire.CodeBadRequest, "chunk larger than %d bytes", wire.ChunkSize))
		return
	case u.n+int64(len(m.Data)) > u.max:
		u.mu.Unlock()
		u.abort(errTooLarge)
		respond(m, refuse(wire.CodeTooLarge, "the result is larger than the type's limit of %d bytes", u.max))
		return
	}
	// The tenant's quota is checked as the bytes arrive: a streamed
	// result's size is known only at its end.
	if fits, used := u.b.quota.Reserve(u.tenant, int64(len(m.Data))); !fits {
		u.mu.Unlock()
		u.overQuota(m, used)
		return
	}
	u.reserved += int64(len(m.Data))
	u.seq++
	u.n += int64(len(m.Data))
	u.h.Write(m.Data)
	u.timer.Reset(u.b.cfg.UploadIdle)
	pw := u.pw
	u.mu.Unlock()
	if len(m.Data) > 0 {
		if _, err := pw.Write(m.Data); err != nil {
			u.abort(err)
			respond(m, u.storeError(err))
			return
		}
	}
	if !last {
		respond(m, ok)
		return
	}
	_ = pw.Close()
	<-u.done
	u.mu.Lock()
	size, perr, n, sum := u.size, u.putErr, u.n, hex.EncodeToString(u.h.Sum(nil))
	u.mu.Unlock()
	switch {
	case perr != nil:
		reply := u.storeError(perr)
		u.end(errors.New(reply.Error.Message))
		respond(m, reply)
	case size != n:
		u.end(fmt.Errorf("the store kept %d of %d bytes", size, n))
		respond(m, refuse(wire.CodeUnavailable, "the store kept %d of %d bytes", size, n))
	default:
		u.end(nil)
		respond(m, &wire.Reply{Stored: &wire.StoredResult{Object: u.object, Size: n, SHA256: sum}})
	}
}

func (u *upload) storeError(err error) *wire.Reply {
	if errors.Is(err, job.ErrStorageFull) {
		// A result that does not fit fails its job (budget_exceeded)
		// rather than being given back to wait for room forever.
		u.b.log.WarnContext(u.logCtx(), "result not stored: the results' byte budget is used up", "object", u.object)
		failed := u.failJob("the result was not stored: the deployment's result storage is full", "the results' byte budget is used up: "+err.Error())
		reply := refuse(wire.CodeTooLarge, "the deployment's result storage is full")
		reply.Failed = failed
		return reply
	}
	if natsjs.Unavailable(err) || errors.Is(err, context.Canceled) {
		return refuse(wire.CodeUnavailable, "the result store could not be reached")
	}
	u.b.log.WarnContext(u.logCtx(), "result not stored", "object", u.object, "err", err)
	return refuse(wire.CodeUnavailable, "the result could not be stored")
}

// overQuota refuses the chunk that would take the upload's tenant past its
// result quota, which used holds already. Nothing of the result stays: the
// put is aborted and its chunks purged before the answer. The job fails
// budget_exceeded here, not on the worker's word: a worker that reports
// the attempt otherwise, or not at all, neither retries it into the same
// refusal nor leaves it hanging.
func (u *upload) overQuota(m *nats.Msg, used int64) {
	quota := u.b.quota.MaxBytes()
	u.b.log.WarnContext(u.logCtx(), "result not stored: its tenant's result quota is used up", "object", u.object,
		"tenant", u.tenant, "tenant_result_bytes", used, "quota", quota)
	if u.b.cfg.OnResultQuotaFull != nil {
		u.b.cfg.OnResultQuotaFull()
	}
	u.abort(errOverQuota)
	u.awaitPut()
	msg := fmt.Sprintf("the result was not stored: it would take the tenant's stored results past its result quota of %d bytes", quota)
	failed := u.failJob(msg, fmt.Sprintf("result %s refused: tenant %s stores %d bytes (this broker's count) of its result quota of %d", u.object, u.tenant, used, quota))
	reply := refuse(wire.CodeTooLarge, "%s", msg)
	reply.Failed = failed
	respond(m, reply)
}

// awaitPut waits, at most opTimeout, for the upload's put to end (an
// aborted put has purged its chunks when it ends).
func (u *upload) awaitPut() {
	t := time.NewTimer(opTimeout)
	defer t.Stop()
	select {
	case <-u.done:
	case <-t.C:
		u.b.log.WarnContext(u.logCtx(), "aborted result put did not end in time; its chunks go with the results' retention", "object", u.object)
	}
}

// failJob fails the upload's job (budget_exceeded, not retried) as a
// worker's fail of kind budget would, with userMsg for the job's owner and
// cause for the operator: the claim, the job's state rules and the
// bookkeeping of a verdict are the fail handler's. A job that moved on
// meanwhile (canceled, failed by the worker) stays as it is. It reports
// whether it failed the job (the refusal then says so: wire.Reply.Failed).
func (u *upload) failJob(userMsg, cause string) bool {
	data, err := json.Marshal(wire.FailRequest{Held: u.held, Kind: wire.KindBudget, Message: cause, UserMessage: userMsg})
	if err != nil {
		return false
	}
	if reply := u.b.fail(u.b.ctx, &request{msg: &nats.Msg{Data: data}, cred: u.cred, typ: u.typ}); reply.Error != nil {
		u.b.log.InfoContext(u.logCtx(), "job of a refused result not failed here", "object", u.object, "code", reply.Error.Code, "why", reply.Error.Message)
		return false
	}
	return true
}

// abort ends an upload that will not complete; the partial object is
// removed by the put's failure.
func (u *upload) abort(cause error) {
	u.mu.Lock()
	pw := u.pw
	u.mu.Unlock()
	if pw != nil {
		_ = pw.CloseWithError(cause)
	}
	u.end(cause)
}

// logCtx is the context the upload's log lines are logged with: its span's.
func (u *upload) logCtx() context.Context {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ctx == nil {
		return context.Background()
	}
	return u.ctx
}

// end finishes the upload and its span: stored when cause is nil.
func (u *upload) end(cause error) {
	u.mu.Lock()
	if u.ended {
		u.mu.Unlock()
		return
	}
	u.ended = true
	if u.timer != nil {
		u.timer.Stop()
	}
	sub, span, n, chunks, reserved := u.sub, u.span, u.n, u.seq, u.reserved
	u.reserved = 0
	u.mu.Unlock()
	// A stored result counts as this broker's own until a reading of the
	// store finds it; one not stored frees what it reserved.
	u.b.quota.Release(u.tenant, reserved, cause == nil)
	if span != nil {
		span.SetAttributes(attribute.Int64("jobgate.result.bytes", n), attribute.Int("jobgate.result.chunks", chunks))
		if cause != nil {
			span.SetAttributes(attribute.String("jobgate.result.outcome", "aborted"))
			span.SetStatus(codes.Error, cause.Error())
		} else {
			span.SetAttributes(attribute.String("jobgate.result.outcome", "stored"))
		}
		span.End()
	}
	if sub != nil {
		_ = sub.Unsubscribe()
	}
	u.b.forgetUpload(u.id)
}

func (b *Broker) forgetUpload(id string) {
	b.mu.Lock()
	delete(b.uploads, id)
	b.mu.Unlock()
}

package broker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
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

// upload is one result streamed from a worker into the result store: the
// worker sends its chunks, in order, to this broker's own subject for it,
// and each chunk is answered once the store took it.
type upload struct {
	b      *Broker
	cred   string
	id     string
	object string
	max    int64
	sub    *nats.Subscription

	mu     sync.Mutex
	pw     *io.PipeWriter
	h      hash.Hash
	n      int64
	seq    int
	timer  *time.Timer
	ended  bool
	done   chan struct{}
	size   int64
	putErr error
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
	u := &upload{b: b, cred: r.cred, id: hex.EncodeToString(raw[:]), object: objectName(h.rec), max: h.decl.MaxResultBytes,
		h: sha256.New(), done: make(chan struct{})}
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
		size, err := b.res.PutResult(trace.ContextWithSpan(b.ctx, span), u.object, h.decl.ContentType, desc, pr)
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
		return refuse(wire.CodeTooLarge, "the deployment's result storage is full")
	}
	if natsjs.Unavailable(err) || errors.Is(err, context.Canceled) {
		return refuse(wire.CodeUnavailable, "the result store could not be reached")
	}
	u.b.log.WarnContext(u.logCtx(), "result not stored", "object", u.object, "err", err)
	return refuse(wire.CodeUnavailable, "the result could not be stored")
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
	sub, span, n, chunks := u.sub, u.span, u.n, u.seq
	u.mu.Unlock()
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

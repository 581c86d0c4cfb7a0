// Package tracing is what jobgate's components share of OpenTelemetry's
// API (never its SDK, which internal/telemetry installs): the tracer, the
// job's trace context as it is stored on the job's record and carried in
// NATS message headers (W3C traceparent and tracestate), the identity of
// an attempt's span, and a log handler that stamps trace_id and span_id on
// every line logged with a job's context.
//
// Where the context lives: on the job's record (job.Record's Trace and
// TraceState), written by the admission. The relay reads nothing but the
// record's change log, a sweeper or a broker nothing but the record, and a
// record outlives every message of its job; only the record reaches every
// later step of a job whatever process takes it. Work messages and events
// carry it too (headers), for the readers of those messages: the notifier,
// a tenant's own event subscriber.
package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/binary"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Header names of the W3C trace context, on HTTP requests and NATS
// messages alike.
const (
	HeaderParent = "traceparent"
	HeaderState  = "tracestate"
)

// Scope is the instrumentation scope of jobgate's spans.
const Scope = "github.com/jobgate/jobgate"

// Tracer is jobgate's tracer on the global provider (a no-op until
// internal/telemetry installs one).
func Tracer() trace.Tracer { return otel.Tracer(Scope) }

// defaultProvider is the global provider before anything is installed.
var defaultProvider = otel.GetTracerProvider()

// Installed reports whether a tracer provider was installed: without one,
// a span records nothing and only carries its parent's context, which a
// hot path can carry without making the span.
func Installed() bool { return otel.GetTracerProvider() != defaultProvider }

var propagator = propagation.TraceContext{}

// Inject returns the traceparent and tracestate of ctx's span, or "" when
// ctx has no valid span context.
func Inject(ctx context.Context) (parent, state string) {
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c[HeaderParent], c[HeaderState]
}

// Extract returns ctx with the remote span context of parent and state (as
// Inject wrote them); ctx unchanged when parent is empty or malformed.
func Extract(ctx context.Context, parent, state string) context.Context {
	if parent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{HeaderParent: parent, HeaderState: state})
}

// SpanContext is the span context of parent and state, invalid when there
// is none.
func SpanContext(parent, state string) trace.SpanContext {
	return trace.SpanContextFromContext(Extract(context.Background(), parent, state))
}

// Header is what a message or request carries its trace context in
// (nats.Header and http.Header both are one).
type Header interface {
	Get(key string) string
	Set(key, value string)
}

// SetHeader writes ctx's trace context to h; when ctx has none, the stored
// one (parent, state), if any. It writes nothing without either.
func SetHeader(ctx context.Context, h Header, parent, state string) {
	if p, s := Inject(ctx); p != "" {
		parent, state = p, s
	}
	if parent == "" {
		return
	}
	h.Set(HeaderParent, parent)
	if state != "" {
		h.Set(HeaderState, state)
	}
}

// FromHeader reads the trace context h carries.
func FromHeader(h Header) (parent, state string) {
	if h == nil {
		return "", ""
	}
	return h.Get(HeaderParent), h.Get(HeaderState)
}

// AttemptSpanID is the span id of a job's attempt span: derived from the
// job's trace, key and attempt, so the broker that claims a job can hand
// its worker the attempt span's context at once, and whichever broker
// takes the attempt's verdict records the span under that very id (see
// WithSpanID). Claim and verdict are two requests, often to two brokers;
// the attempt span covers both.
func AttemptSpanID(traceID trace.TraceID, key string, attempt int) trace.SpanID {
	h := sha256.New()
	h.Write(traceID[:])
	h.Write([]byte(key))
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(attempt))
	h.Write(n[:])
	var id trace.SpanID
	copy(id[:], h.Sum(nil))
	if !id.IsValid() {
		id[7] = 1
	}
	return id
}

// AttemptContext is the span context of an attempt of the job whose
// stored trace context is parent, state: the attempt span as its worker
// sees it (remote, sampled as the job's trace is). Invalid when the job
// has no trace.
func AttemptContext(parent, state, key string, attempt int) trace.SpanContext {
	p := SpanContext(parent, state)
	if !p.IsValid() {
		return p
	}
	return p.WithSpanID(AttemptSpanID(p.TraceID(), key, attempt)).WithRemote(true)
}

type spanIDKey struct{}

// WithSpanID asks the ID generator of internal/telemetry to give the next
// span started with ctx the id id (an attempt span: AttemptSpanID).
func WithSpanID(ctx context.Context, id trace.SpanID) context.Context {
	return context.WithValue(ctx, spanIDKey{}, id)
}

// SpanIDFrom is the id WithSpanID asked for, if any.
func SpanIDFrom(ctx context.Context) (trace.SpanID, bool) {
	id, ok := ctx.Value(spanIDKey{}).(trace.SpanID)
	return id, ok && id.IsValid()
}

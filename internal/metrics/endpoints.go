package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Endpoints are the endpoint caller's metrics (docs/endpoints.md): its
// requests to each endpoint type's handler by answer and by the outcome
// jobgate drew from it, their duration,
// and the requests in flight beside the type's concurrency.
type Endpoints struct {
	requests *prometheus.CounterVec
	outcomes *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
	limit    *prometheus.GaugeVec
}

// EndpointBuckets are the bounds of jobgate_endpoint_request_duration_seconds:
// from a no-op handler on the same host to the longest attempt budgets.
var EndpointBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800}

// NewEndpoints registers the endpoint caller's metrics in m's registry (a
// second caller of the process shares them); nil when m is nil.
func (m *Metrics) NewEndpoints() (*Endpoints, error) {
	if m == nil {
		return nil, nil
	}
	e := &Endpoints{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobgate_endpoint_requests_total",
			Help: "Requests to endpoint types' handlers by answer: 2xx, 3xx, 4xx, 5xx, error (no answer: connection, TLS, address refused), aborted (the attempt ended first: cancel, timeout, stop).",
		}, []string{"type", "answer"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobgate_endpoint_outcomes_total",
			Help: "Requests to endpoint types' handlers by what jobgate made of the answer: succeeded, retry, rejected, too_large, error, aborted, failed (a 202's fail or silence).",
		}, []string{"type", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jobgate_endpoint_request_duration_seconds",
			Help:    "Duration of the requests to endpoint types' handlers, from sending to the answer's last byte.",
			Buckets: EndpointBuckets,
		}, []string{"type"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "jobgate_endpoint_requests_in_flight", Help: "Requests to an endpoint type's handler under way in this process.",
		}, []string{"type"}),
		limit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "jobgate_endpoint_concurrency", Help: "An endpoint type's declared concurrency: its requests in flight across the deployment at most.",
		}, []string{"type"}),
	}
	var err error
	e.requests, err = register(m.Registry, e.requests)
	if err == nil {
		e.outcomes, err = register(m.Registry, e.outcomes)
	}
	if err == nil {
		e.duration, err = register(m.Registry, e.duration)
	}
	if err == nil {
		e.inFlight, err = register(m.Registry, e.inFlight)
	}
	if err == nil {
		e.limit, err = register(m.Registry, e.limit)
	}
	return e, err
}

// register registers c, or returns the collector of its name registered
// already.
func register[C prometheus.Collector](r *prometheus.Registry, c C) (C, error) {
	err := r.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

// Request counts one request of typ that ended with answer and took took.
func (e *Endpoints) Request(typ, answer string, took time.Duration) {
	if e == nil {
		return
	}
	e.requests.WithLabelValues(typ, answer).Inc()
	e.duration.WithLabelValues(typ).Observe(took.Seconds())
}

// Outcome counts one request of typ by what its answer came to (for a
// 202, once its attempt ended).
func (e *Endpoints) Outcome(typ, outcome string) {
	if e == nil {
		return
	}
	e.outcomes.WithLabelValues(typ, outcome).Inc()
}

// InFlight moves typ's requests under way by delta.
func (e *Endpoints) InFlight(typ string, delta int) {
	if e == nil {
		return
	}
	e.inFlight.WithLabelValues(typ).Add(float64(delta))
}

// Limit sets typ's declared concurrency.
func (e *Endpoints) Limit(typ string, n int) {
	if e == nil {
		return
	}
	e.limit.WithLabelValues(typ).Set(float64(n))
}

// Forget drops the series of a type no longer run.
func (e *Endpoints) Forget(typ string) {
	if e == nil {
		return
	}
	e.limit.DeleteLabelValues(typ)
}

package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTP is the gateway's count of the requests it answered: by route (the
// route's pattern, never the path, so job ids make no series), method and
// status, their latency by route, and the refusals an operator alerts on
// on their own: 429 rate-limited and 507 storage-full.
type HTTP struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	rateLimited *prometheus.CounterVec
	storageFull *prometheus.CounterVec
}

// HTTPBuckets are the bounds of jobgate_http_request_duration_seconds: from
// a status read served from memory to a long-poll's 30 s.
var HTTPBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// NewHTTP registers the request metrics in m's registry (a second gateway
// of the process shares them); nil when m is nil.
func (m *Metrics) NewHTTP() (*HTTP, error) {
	if m == nil {
		return nil, nil
	}
	h := &HTTP{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobgate_http_requests_total",
			Help: "HTTP requests the gateway answered, by route pattern (\"unmatched\" for no route), method and status.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jobgate_http_request_duration_seconds",
			Help:    "Time from a request's arrival to its handler's return, by route pattern (a long-poll's includes its wait; an event stream's only its start).",
			Buckets: HTTPBuckets,
		}, []string{"route"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobgate_http_rate_limited_total",
			Help: "Requests answered 429 rate-limited (a rate limit or a cap on streams, long-polls or bulk calls), by route pattern.",
		}, []string{"route"}),
		storageFull: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobgate_http_storage_full_total",
			Help: "Requests answered 507 storage-full (a budget or a tenant's result quota 90% used), by route pattern.",
		}, []string{"route"}),
	}
	var err error
	if h.requests, err = register(m.Registry, h.requests); err != nil {
		return nil, err
	}
	if h.duration, err = register(m.Registry, h.duration); err != nil {
		return nil, err
	}
	if h.rateLimited, err = register(m.Registry, h.rateLimited); err != nil {
		return nil, err
	}
	if h.storageFull, err = register(m.Registry, h.storageFull); err != nil {
		return nil, err
	}
	return h, nil
}

// Request counts one answered request.
func (h *HTTP) Request(route, method string, status int, took time.Duration) {
	if h == nil {
		return
	}
	h.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	h.duration.WithLabelValues(route).Observe(took.Seconds())
	switch status {
	case 429:
		h.rateLimited.WithLabelValues(route).Inc()
	case 507:
		h.storageFull.WithLabelValues(route).Inc()
	}
}

// CanRunOutOfStorage exports jobgate_http_storage_full_total for each route
// at 0 before its first 507: a counter that appears only with its first
// increase hides that increase from rate() and increase(), and the alert
// on it would miss the first refusals.
func (h *HTTP) CanRunOutOfStorage(routes ...string) {
	if h == nil {
		return
	}
	for _, r := range routes {
		h.storageFull.WithLabelValues(r)
	}
}

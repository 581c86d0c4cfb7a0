package system

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// opsServer serves /healthz, /readyz and /metrics for a process that runs
// no gateway (settings.OpsAddr): without it a dispatcher's per-type job
// gauges and attempt counts, a notifier's backlog, a renderer's renders
// could not be scraped, and an orchestrator could not probe them. Its
// listener is bound in claim, so a taken port fails the start at once.
type opsServer struct {
	ln  net.Listener
	srv *http.Server
}

func (s *System) newOps(ln net.Listener) *opsServer {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.ready(ctx); err != nil {
			s.log.Warn("not ready", "err", err)
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"type":"/problems/unavailable","title":"Service unavailable","status":503}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ready"}`))
	})
	mux.Handle("GET /metrics", guardMetrics(s.settings.MetricsToken,
		promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{})))
	return &opsServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
}

// ready is the gateway's /readyz for a process without one: connected, and
// (unless it runs only workers, whose credential may reach nothing else)
// the job records answer.
func (s *System) ready(ctx context.Context) error {
	if s.nc == nil || s.nc.Status() != nats.CONNECTED {
		return errors.New("nats connection down")
	}
	if s.res == nil || s.workersOnly() {
		return nil
	}
	if err := s.res.Jobs.Ping(ctx); err != nil {
		return fmt.Errorf("job records: %w", err)
	}
	return nil
}

// guardMetrics lets only a scraper with the metrics token through, as the
// gateway's /metrics does (the series name tenants).
func guardMetrics(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		got := sha256.Sum256([]byte(tok)) // compared as digests: constant time
		if !ok || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="jobgate"`)
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"type":"/problems/unauthorized","title":"Unauthorized","status":401}`))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (o *opsServer) Start(context.Context) error {
	go func() { _ = o.srv.Serve(o.ln) }() // ends with Shutdown
	return nil
}

func (o *opsServer) Stop(ctx context.Context) error {
	if err := o.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("ops listener: %w", err)
	}
	return nil
}

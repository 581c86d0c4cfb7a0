package main

import (
	"context"
	"fmt"
	"net"

	"github.com/jobgate/jobgate/gateway"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/config"
)

// runServe runs gateway, dispatcher, renderer and notifier in one process on
// an embedded NATS server: the default a new user runs.
func (m *Main) runServe(ctx context.Context, args []string) error {
	fs := newFlagSet("serve", m)
	sf := bindSettings(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := sf.load(fs, m.Getenv)
	if err != nil {
		return err
	}
	if err := gateway.CheckDev(cfg.HTTPAddr, cfg.Dev); err != nil {
		return err // before anything is created
	}
	claim, err := claimProcessResources(cfg, true)
	if err != nil {
		return err
	}
	defer claim.release()
	if _, err := auth.LoadSecret(cfg.AuthSecret, cfg.DataDir, cfg.Embedded()); err != nil {
		return err
	}
	rt, err := openRuntime(ctx, cfg, "serve", m.Stderr, serveEmbeddedHooks(cfg)...)
	if err != nil {
		return err
	}
	defer rt.close()
	rt.httpListener = claim.http
	return m.runServices(ctx, rt, []string{"dispatcher", "renderer", "notifier", "gateway"}, true)
}

// processClaim is what a process takes before it starts anything: the
// data dir's lock (embedded server only) and the gateway's listen address.
type processClaim struct {
	http   net.Listener // nil without a gateway
	unlock func()
}

// claimProcessResources takes the data dir lock, then binds the HTTP
// address, so a second server on the same data dir or a port that is taken
// fails at once, naming the lock or the address, before the embedded NATS
// server, the secrets or any stream is touched.
func claimProcessResources(cfg *config.Config, gateway bool) (*processClaim, error) {
	c := &processClaim{unlock: func() {}}
	if cfg.Embedded() {
		unlock, err := lockDataDir(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		c.unlock = unlock
	}
	if gateway {
		ln, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			c.unlock()
			return nil, fmt.Errorf("gateway listen %s: %w", cfg.HTTPAddr, err)
		}
		c.http = ln
	}
	return c, nil
}

// release closes the listener (a no-op once the gateway has shut it down)
// and drops the lock, last, after the embedded server has stopped.
func (c *processClaim) release() {
	if c.http != nil {
		_ = c.http.Close()
	}
	c.unlock()
}

// runComponent runs one component against an external NATS (or, without
// --nats, an embedded one, which is handy for a single-process try-out).
func (m *Main) runComponent(ctx context.Context, name string, args []string) error {
	fs := newFlagSet(name, m)
	sf := bindSettings(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := sf.load(fs, m.Getenv)
	if err != nil {
		return err
	}
	claim, err := claimProcessResources(cfg, name == "gateway")
	if err != nil {
		return err
	}
	defer claim.release()
	if name == "gateway" {
		if _, err := auth.LoadSecret(cfg.AuthSecret, cfg.DataDir, cfg.Embedded()); err != nil {
			return err
		}
	}
	rt, err := openRuntime(ctx, cfg, name, m.Stderr, serveEmbeddedHooks(cfg)...)
	if err != nil {
		return err
	}
	defer rt.close()
	rt.httpListener = claim.http
	return m.runServices(ctx, rt, []string{name}, false)
}

// runServices starts the named components, waits for ctx, then stops them
// in reverse order so the gateway drains before the workers go.
func (m *Main) runServices(ctx context.Context, rt *process, names []string, serve bool) error {
	var svcs services
	defer svcs.stop()
	if err := svcs.start(ctx, rt, names, serve, nil); err != nil {
		return err
	}
	if serve {
		m.printBanner(rt)
	}
	rt.log.Info("running", "components", names)
	<-ctx.Done()
	rt.log.Info("shutting down")
	return nil
}

func newService(rt *process, name string, serve bool) (service, error) {
	switch name {
	case "gateway":
		return newGateway(rt, serve)
	case "dispatcher":
		return newDispatcher(rt)
	case "renderer":
		return newRenderer(rt)
	case "notifier":
		return newNotifier(rt)
	}
	return nil, fmt.Errorf("unknown component %q", name)
}

func (m *Main) printBanner(rt *process) {
	fmt.Fprintf(m.Stdout, `jobgate is serving
  API:       http://%s  (OpenAPI at /openapi.yaml, page at /)
%s  data dir:  %s
  token:     bin/jobgate token --data-dir %s --tenant 4 --subject reviewer-47
  try:       curl -H "Authorization: Bearer $TOKEN" -H "Idempotency-Key: r-63" \
               -H "Content-Type: application/json" \
               -d '{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":63}}' \
               http://%s/v1/jobs
`, rt.cfg.HTTPAddr, natsBannerLine(rt), rt.cfg.DataDir, rt.cfg.DataDir, rt.cfg.HTTPAddr)
}

// natsBannerLine names the embedded server's NATS address when it accepts
// clients (JOBGATE_NATS_LISTEN): where event subscribers connect.
func natsBannerLine(rt *process) string {
	if rt.embedded == nil {
		return ""
	}
	u := rt.embedded.ClientURL()
	if u == "" {
		return ""
	}
	return fmt.Sprintf("  NATS:      %s  (events: jobgate.events.<tenant>.>; credentials: jobgate nats-user --tenant T)\n", u)
}

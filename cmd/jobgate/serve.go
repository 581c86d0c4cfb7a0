package main

import (
	"context"
	"fmt"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/system"
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
	return m.runSystem(ctx, cfg, nil)
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
	c, err := system.ParseComponent(name)
	if err != nil {
		return &usageError{err.Error()}
	}
	// Only serve honours --dev (the page's /dev/token sign-in); a
	// standalone gateway never offers it.
	cfg.Dev = false
	return m.runSystem(ctx, cfg, []system.Component{c})
}

// runSystem starts the components (all of them for serve: nil) through
// system, waits for ctx (SIGTERM, Ctrl-C), then stops them within
// system.StopTimeout: the gateway drains first, then the workers, the
// dispatcher and the notifier, each within its share of the deadline. ctx
// bounds only the start: its end is the signal to stop, not the stop.
func (m *Main) runSystem(ctx context.Context, cfg *config.Config, components []system.Component) error {
	sys, err := system.Start(ctx, system.Config{Settings: cfg, Components: components, LogOutput: m.Stderr})
	if err != nil {
		return err
	}
	if components == nil {
		m.printBanner(sys)
	}
	names := components
	if names == nil {
		names = []system.Component{system.Notifier, system.Dispatcher, system.Renderer, system.Gateway}
	}
	sys.Logger().Info("running", "components", names)
	<-ctx.Done()
	sys.Logger().Info("shutting down", "deadline", system.StopTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), system.StopTimeout)
	defer cancel()
	return sys.Stop(sctx)
}

func (m *Main) printBanner(sys *system.System) {
	cfg := sys.Settings()
	fmt.Fprintf(m.Stdout, `jobgate is serving
  API:       %s  (OpenAPI at /openapi.yaml, page at /)
%s  data dir:  %s
  token:     bin/jobgate token --data-dir %s --tenant 4 --subject reviewer-47
  try:       curl -H "Authorization: Bearer $TOKEN" -H "Idempotency-Key: r-63" \
               -H "Content-Type: application/json" \
               -d '{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":63}}' \
               %s/v1/jobs
`, sys.URL(), natsBannerLine(sys), cfg.DataDir, cfg.DataDir, sys.URL())
}

// natsBannerLine names the embedded server's NATS address when it accepts
// clients (JOBGATE_NATS_LISTEN): where event subscribers connect.
func natsBannerLine(sys *system.System) string {
	cfg := sys.Settings()
	if !cfg.Embedded() || sys.NATSURL() == "" {
		return ""
	}
	return fmt.Sprintf("  NATS:      %s  (events: jobgate.events.<tenant>.>; credentials: jobgate nats-user --tenant T)\n", sys.NATSURL())
}

package main

import (
	"github.com/jobgate/jobgate/dispatcher"
	"github.com/jobgate/jobgate/internal/broker"
)

// newDispatcher builds the dispatcher (relay, sweeper, exhaustion handler)
// from the runtime's settings; the finer knobs keep their defaults.
func newDispatcher(rt *process) (service, error) {
	return dispatcher.New(dispatcher.Config{
		MaxAttempts:   rt.cfg.MaxAttempts,
		RenderTimeout: rt.cfg.RenderTimeout,
		Metrics:       rt.metrics,
		Broker: broker.Config{
			MaxAttempts:         rt.cfg.MaxAttempts,
			TenantWeights:       rt.cfg.Renderer.TenantWeights,
			TenantMaxRunning:    rt.cfg.Renderer.TenantMaxRunning,
			TenantMaxRunningFor: rt.cfg.Renderer.TenantMaxRunningFor,
		},
	}, rt.res, rt.log.With("service", "dispatcher"))
}

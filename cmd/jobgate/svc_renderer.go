package main

import (
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/renderer"
)

// newRenderer builds a renderer (the permit_report worker) on the process's
// connection; the finer knobs keep their documented defaults.
func newRenderer(rt *process) (service, error) {
	return renderer.New(renderer.Config{
		Concurrency:    rt.cfg.Renderer.Concurrency,
		MaxAttempts:    rt.cfg.MaxAttempts,
		RenderTimeout:  rt.cfg.RenderTimeout,
		MaxOutputBytes: rt.cfg.Renderer.MaxOutputBytes,
		Failpoints:     rt.fp,
		Metrics:        rt.metrics,
	}, worker.Config{Conn: rt.nc, Logger: rt.log.With("service", "renderer")})
}

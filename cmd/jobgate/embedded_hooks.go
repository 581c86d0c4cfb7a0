package main

import (
	"github.com/jobgate/jobgate/pkg/config"
	"github.com/jobgate/jobgate/pkg/wiring"
)

// serveEmbeddedHooks adjusts the embedded server before it starts (tenant
// subscriber accounts when it listens for outside NATS clients).
func serveEmbeddedHooks(cfg *config.Config) []func(*wiring.EmbeddedConfig) {
	_ = cfg
	return nil
}

package main

import (
	"github.com/jobgate/jobgate/pkg/config"
	"github.com/jobgate/jobgate/pkg/wiring"
	"github.com/nats-io/nats-server/v2/server"
)

// serveEmbeddedHooks adjusts the embedded server before it starts. When it
// listens for outside NATS clients, every such client must log in with
// tenant subscriber credentials (`jobgate nats-user`), which confine it to
// its tenant's events; the process's own in-process connections keep full
// access.
func serveEmbeddedHooks(cfg *config.Config) []func(*wiring.EmbeddedConfig) {
	if cfg.NATS.Listen == "" {
		return nil
	}
	return []func(*wiring.EmbeddedConfig){func(ec *wiring.EmbeddedConfig) {
		prev := ec.Configure
		ec.Configure = func(o *server.Options) error {
			if prev != nil {
				if err := prev(o); err != nil {
					return err
				}
			}
			secret, err := wiring.SubscriberSecret(cfg.DataDir)
			if err != nil {
				return err
			}
			auth, err := wiring.NewTenantAuth(secret)
			if err != nil {
				return err
			}
			return auth.Configure(o)
		}
	}}
}

package main

import (
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats-server/v2/server"
)

// serveEmbeddedHooks adjusts the embedded server before it starts. When it
// listens for outside NATS clients, every such client must log in with
// tenant subscriber credentials (`jobgate nats-user`), which confine it to
// its tenant's events; the process's own in-process connections keep full
// access.
func serveEmbeddedHooks(cfg *config.Config) []func(*natsjs.EmbeddedConfig) {
	if cfg.NATS.Listen == "" {
		return nil
	}
	return []func(*natsjs.EmbeddedConfig){func(ec *natsjs.EmbeddedConfig) {
		prev := ec.Configure
		ec.Configure = func(o *server.Options) error {
			if prev != nil {
				if err := prev(o); err != nil {
					return err
				}
			}
			secret, err := natsjs.SubscriberSecret(cfg.DataDir)
			if err != nil {
				return err
			}
			auth, err := natsjs.NewTenantAuth(secret)
			if err != nil {
				return err
			}
			return auth.Configure(o)
		}
	}}
}

// Package brokertest starts jobgate's side of the worker protocol for the
// tests of packages that run workers without a dispatcher. It is imported
// by tests only.
package brokertest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/broker"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// Start runs a broker on a connection of its own to env, as a dispatcher
// runs it, until the test ends.
func Start(t testing.TB, env *jobtest.Env, cfg broker.Config) *broker.Broker {
	t.Helper()
	conn := env.Connect(t, "broker")
	b, err := broker.New(cfg, Stores(conn.Res), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, b.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, b.Stop(ctx))
	})
	return b
}

// Stores are the broker's adapters on res, answering on res's connection:
// system's BrokerStores, for the tests of the packages that
// system imports (and so cannot import it).
func Stores(res *natsjs.Resources) broker.Stores {
	return broker.Stores{
		Jobs: res.Jobs, Work: res.Work, Events: res.Events, Secrets: res.Secrets, Types: res.Types, Results: res,
		Slots: res.Slots, Conn: res.JS.Conn(),
	}
}

package jobtest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/broker"
	"github.com/stretchr/testify/require"
)

// Broker starts jobgate's side of the worker protocol on a connection of
// its own, as a dispatcher runs it, until the test ends.
func (e *Env) Broker(t testing.TB, cfg broker.Config) *broker.Broker {
	t.Helper()
	conn := e.Connect(t, "broker")
	b, err := broker.New(cfg, conn.Res, conn.NC, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, b.Start(ctx))
	t.Cleanup(b.Stop)
	return b
}

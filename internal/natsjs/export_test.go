package natsjs

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// EmptyJetStream is emptyJetStream for the package's external tests.
var EmptyJetStream = emptyJetStream

// emptyJetStream starts an embedded server with nothing provisioned.
func emptyJetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	emb, err := StartEmbedded(EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(emb.Shutdown)
	nc, err := emb.Connect(t.Name())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

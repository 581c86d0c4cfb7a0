package natsserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// With every budget of the layout reserved, an embedded server still takes
// a stream jobgate does not provision (the bench's raw pipeline): NATS
// counts a stream without a byte limit as one byte more than reserved.
func TestAnEmbeddedServerHasRoomBeyondTheBudgets(t *testing.T) {
	t.Parallel()
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(emb.Shutdown)
	nc, err := emb.Connect(t.Name())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = natsjs.Provision(ctx, js, natsjs.DefaultLayout())
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}, Storage: jetstream.FileStorage})
	require.NoError(t, err)
}

package system_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/jobgate/jobgate/system"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// serve reads what each tenant stores (a listing of every result object)
// once a reading for the whole process: the gateway, which admits against
// the result quota, and the broker, which refuses uploads past it, count
// on one tally instead of listing the results each.
func TestServeListsTheResultsOncePerReading(t *testing.T) {
	t.Parallel()
	// An external server, so the listings' consumers are watched from
	// before the system starts.
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:-1"})
	require.NoError(t, err)
	t.Cleanup(emb.Shutdown)
	watch, err := emb.Connect("watch")
	require.NoError(t, err)
	t.Cleanup(watch.Close)
	var listings atomic.Int64
	for _, subj := range []string{"$JS.API.CONSUMER.CREATE.OBJ_" + natsjs.BucketResults, "$JS.API.CONSUMER.CREATE.OBJ_" + natsjs.BucketResults + ".>"} {
		_, err := watch.Subscribe(subj, func(*nats.Msg) { listings.Add(1) })
		require.NoError(t, err)
	}
	require.NoError(t, watch.Flush())

	settings := config.Default()
	settings.DataDir, settings.HTTPAddr, settings.NATS.URL = t.TempDir(), "127.0.0.1:0", emb.ClientURL()
	settings.AuthSecret = "0123456789abcdef0123456789abcdef"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sys, err := system.Start(ctx, system.Config{Settings: &settings, LogOutput: &syncBuffer{}})
	require.NoError(t, err)
	defer func() { require.NoError(t, sys.Stop(context.Background())) }()

	// The first reading is at once; the next not before 30 s.
	require.Eventually(t, func() bool { return listings.Load() > 0 }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(2 * time.Second)
	require.Equal(t, int64(1), listings.Load(), "one listing of the results per reading")
}

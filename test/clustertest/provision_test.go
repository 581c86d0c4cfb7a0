package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// Three processes starting at once on three nodes of a fresh cluster all
// provision R3 resources without error; the buckets read from their stream
// leaders; a process configured for R1 or another TTL is refused with the
// setting named and changes nothing.
func TestProvisionOnCluster(t *testing.T) {
	c := Start(t, 3)
	layout := natsjs.DefaultLayout()
	layout.Replicas = 3

	var wg sync.WaitGroup
	res := make([]*natsjs.Resources, 3)
	for i := range res {
		wg.Go(func() { _, res[i] = c.Provision(fmt.Sprintf("process-%d", i+1), c.Node(i).URL(), layout) })
	}
	wg.Wait()
	js := res[0].JS
	for _, name := range []string{"KV_" + natsjs.BucketJobs, "KV_" + natsjs.BucketMeta, "KV_" + natsjs.BucketNotices,
		"OBJ_" + natsjs.BucketResults, natsjs.StreamWork, natsjs.StreamEvents, natsjs.StreamDeliveries} {
		cfg := streamConfig(t, js, name)
		require.Equal(t, 3, cfg.Replicas, name)
		require.False(t, cfg.AllowDirect, "%s is read from its leader", name)
	}

	r1 := natsjs.DefaultLayout()
	_, err := provisionOnce(js, r1)
	require.ErrorIs(t, err, natsjs.ErrLayoutMismatch)
	require.ErrorContains(t, err, "replicas (nats.replicas, JOBGATE_NATS_REPLICAS, --replicas) is 3 on JOBGATE_JOBS, "+
		"JOBGATE_META, JOBGATE_NOTICES, JOBGATE_TYPES, JOBGATE_WORKERS, JOBGATE_SLOTS, JOBGATE_WORK, JOBGATE_EVENTS, JOBGATE_DELIVERIES, JOBGATE_SCHEDULE, JOBGATE_BATCHES, JOBGATE_RESULTS, but this process is configured for 1")

	ttl := layout
	ttl.JobTTL = time.Hour
	_, err = provisionOnce(js, ttl)
	require.ErrorIs(t, err, natsjs.ErrLayoutMismatch)
	require.ErrorContains(t, err, "JOBGATE_JOB_TTL")
	require.Equal(t, 3, streamConfig(t, js, "KV_"+natsjs.BucketJobs).Replicas, "nothing was changed")
	require.Equal(t, layout.JobTTL, streamConfig(t, js, "KV_"+natsjs.BucketJobs).MaxAge)

	_, err = provisionOnce(js, layout)
	require.NoError(t, err, "a later process with the deployment's layout starts")
}

func provisionOnce(js jetstream.JetStream, l natsjs.Layout) (*natsjs.Resources, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return natsjs.Provision(ctx, js, l)
}

func streamConfig(t *testing.T, js jetstream.JetStream, name string) jetstream.StreamConfig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	require.NoError(t, err)
	return s.CachedInfo().Config
}

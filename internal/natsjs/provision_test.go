package natsjs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// setupProvision starts an empty embedded JetStream and returns a JetStream
// handle on it, nothing provisioned yet.
func setupProvision(t *testing.T) jetstream.JetStream {
	t.Helper()
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(emb.Shutdown)
	nc, err := emb.Connect(t.Name())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

func provision(js jetstream.JetStream, l natsjs.Layout) (*natsjs.Resources, error) {
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

// Processes starting together all provision the same layout: every one
// succeeds, and the resources are those of the layout.
func TestProvisionConcurrentStartsAgree(t *testing.T) {
	t.Parallel()
	js := setupProvision(t)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = provision(js, natsjs.DefaultLayout())
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "process %d", i)
	}
	res, err := provision(js, natsjs.DefaultLayout())
	require.NoError(t, err, "a later start finds everything in place")
	require.NotNil(t, res.Jobs)
	require.NotNil(t, res.Results)

	jobs := streamConfig(t, js, "KV_"+natsjs.BucketJobs)
	require.Equal(t, 720*time.Hour, jobs.MaxAge)
	require.Equal(t, 1, jobs.Replicas)
	work := streamConfig(t, js, natsjs.StreamWork)
	require.Equal(t, jetstream.WorkQueuePolicy, work.Retention)
	require.Equal(t, 10*time.Minute, work.Duplicates)
}

// A process configured differently from the deployment refuses to start and
// names the setting; it does not reconfigure what the others use.
func TestProvisionMismatchNamesSettingAndChangesNothing(t *testing.T) {
	t.Parallel()
	js := setupProvision(t)
	_, err := provision(js, natsjs.DefaultLayout())
	require.NoError(t, err)

	other := natsjs.DefaultLayout()
	other.JobTTL = 24 * time.Hour
	_, err = provision(js, other)
	require.ErrorIs(t, err, natsjs.ErrLayoutMismatch)
	require.ErrorContains(t, err, "job TTL (job_ttl, JOBGATE_JOB_TTL, --job-ttl) is 720h0m0s on JOBGATE_JOBS, JOBGATE_NOTICES, JOBGATE_WORK, JOBGATE_SCHEDULE, JOBGATE_BATCHES, but this process is configured for 24h0m0s")
	var mm *natsjs.MismatchError
	require.True(t, errors.As(err, &mm))
	require.Equal(t, natsjs.SettingJobTTL, mm.Setting)
	require.Equal(t, 720*time.Hour, streamConfig(t, js, "KV_"+natsjs.BucketJobs).MaxAge, "the deployment is untouched")
	require.Equal(t, 720*time.Hour, streamConfig(t, js, natsjs.StreamWork).MaxAge)

	results := natsjs.DefaultLayout()
	results.ResultTTL = time.Hour
	_, err = provision(js, results)
	require.ErrorIs(t, err, natsjs.ErrLayoutMismatch)
	require.ErrorContains(t, err, "result TTL (result_ttl, JOBGATE_RESULT_TTL, --result-ttl) is 168h0m0s on JOBGATE_RESULTS, but this process is configured for 1h0m0s")
	require.Equal(t, 168*time.Hour, streamConfig(t, js, "OBJ_"+natsjs.BucketResults).MaxAge)

	_, err = provision(js, natsjs.DefaultLayout())
	require.NoError(t, err, "the original layout still provisions")
}

// Replicas 3 against a deployment provisioned with 1 is a mismatch, listed
// for every resource, not an attempt to grow them.
func TestProvisionReplicaMismatch(t *testing.T) {
	t.Parallel()
	js := setupProvision(t)
	_, err := provision(js, natsjs.DefaultLayout())
	require.NoError(t, err)

	r3 := natsjs.DefaultLayout()
	r3.Replicas = 3
	_, err = provision(js, r3)
	require.ErrorIs(t, err, natsjs.ErrLayoutMismatch)
	require.ErrorContains(t, err, "replicas (nats.replicas, JOBGATE_NATS_REPLICAS, --replicas) is 1 on JOBGATE_JOBS, "+
		"JOBGATE_META, JOBGATE_NOTICES, JOBGATE_TYPES, JOBGATE_WORKERS, JOBGATE_SLOTS, JOBGATE_WORK, JOBGATE_EVENTS, JOBGATE_DELIVERIES, JOBGATE_SCHEDULE, JOBGATE_BATCHES, JOBGATE_RESULTS, but this process is configured for 3")
	var mm *natsjs.MismatchError
	require.ErrorAs(t, err, &mm)
	require.Equal(t, natsjs.SettingReplicas, mm.Setting)
	jobs := streamConfig(t, js, "KV_"+natsjs.BucketJobs)
	require.Equal(t, 1, jobs.Replicas, "nothing was changed")
	require.True(t, jobs.AllowDirect, "one replica keeps direct gets")
}

// Replicas 3 on a single server is refused with what to do about it.
func TestProvisionReplicasNeedCluster(t *testing.T) {
	t.Parallel()
	js := setupProvision(t)
	r3 := natsjs.DefaultLayout()
	r3.Replicas = 3
	_, err := provision(js, r3)
	require.Error(t, err)
	require.NotErrorIs(t, err, natsjs.ErrLayoutMismatch)
	require.ErrorContains(t, err, "cluster")
	require.ErrorContains(t, err, "JOBGATE_NATS_REPLICAS")
}

// The shortest job TTL the settings accept is one provisioning accepts, and
// a shorter one is refused by the layout with words an operator can act on,
// not by the server's "duplicates window can not be larger then max age".
func TestShortestValidJobTTLProvisions(t *testing.T) {
	t.Parallel()
	c := config.Default()
	c.JobTTL = config.MinJobTTL - time.Second
	require.ErrorContains(t, c.Validate(), "job_ttl must be at least 10m")
	c.JobTTL = config.MinJobTTL
	require.NoError(t, c.Validate())

	js := setupProvision(t)
	l := natsjs.DefaultLayout()
	l.JobTTL = 5 * time.Minute
	_, err := provision(js, l)
	require.ErrorContains(t, err, "job TTL must be at least 10m0s")
	require.NotContains(t, err.Error(), "API error")

	l.JobTTL = config.MinJobTTL
	_, err = provision(js, l)
	require.NoError(t, err)
}

// The brokers read work, and a job's newest event, by direct get on one
// server: streams provisioned by an earlier version, without direct gets,
// gain them at the next start.
func TestProvisionTurnsDirectGetsOnForWorkAndEvents(t *testing.T) {
	t.Parallel()
	js := setupProvision(t)
	_, err := provision(js, natsjs.DefaultLayout())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, name := range []string{natsjs.StreamWork, natsjs.StreamEvents} {
		cfg := streamConfig(t, js, name)
		require.True(t, cfg.AllowDirect, name)
		cfg.AllowDirect = false
		_, err = js.UpdateStream(ctx, cfg)
		require.NoError(t, err)
		require.False(t, streamConfig(t, js, name).AllowDirect)
	}
	_, err = provision(js, natsjs.DefaultLayout())
	require.NoError(t, err)
	for _, name := range []string{natsjs.StreamWork, natsjs.StreamEvents} {
		require.True(t, streamConfig(t, js, name).AllowDirect, name)
	}
}

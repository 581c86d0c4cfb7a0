package clustertest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// BenchmarkAdmissionWrites measures the two JetStream writes of one
// admission (the create-only record, then the work message), from 16
// concurrent callers, on the deployments the README's durability table
// compares: one embedded node (R1) and a three-node loopback cluster (R3),
// each with the default sync interval and with an fsync before every
// acknowledgement. Everything shares one machine, so the cluster figures
// include the cost of running three servers on its cores; on loopback the
// network adds no latency.
func BenchmarkAdmissionWrites(b *testing.B) {
	for _, bc := range []struct {
		name    string
		cluster bool
		sync    bool
	}{
		{"R1-embedded", false, false},
		{"R1-embedded-sync-always", false, true},
		{"R3-cluster", true, false},
		{"R3-cluster-sync-always", true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			res := benchResources(b, bc.cluster, bc.sync)
			params, fp := benchParams(b)
			var seq atomic.Int64
			prefix := fmt.Sprintf("bench-%d", time.Now().UnixNano())
			b.SetParallelism(8) // 16 callers on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					key := fmt.Sprintf("%s-%d", prefix, seq.Add(1))
					now := time.Now().UTC()
					rec := &job.Record{
						ID: job.DeriveID(authSecret, tenant, requester, key), Tenant: tenant, Requester: requester,
						KeyHash: job.HashKey(key), Fingerprint: fp, Type: "permit_report", Params: params,
						State: job.StateQueued, CreatedAt: now, UpdatedAt: now,
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err := res.Jobs.Create(ctx, rec)
					if err == nil {
						err = natsjs.PublishWork(ctx, res.JS, rec, 0)
					}
					cancel()
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

func benchResources(b *testing.B, cluster, sync bool) *natsjs.Resources {
	b.Helper()
	layout := natsjs.DefaultLayout()
	if !cluster {
		emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: b.TempDir(), SyncAlways: sync})
		require.NoError(b, err)
		b.Cleanup(emb.Shutdown)
		nc, err := emb.Connect("bench")
		require.NoError(b, err)
		b.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		require.NoError(b, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := natsjs.Provision(ctx, js, layout)
		require.NoError(b, err)
		return res
	}
	c := Start(b, 3, func(o *server.Options) { o.SyncAlways = sync })
	layout.Replicas = 3
	_, res := c.Provision("bench", c.URLs(), layout)
	return res
}

func benchParams(b *testing.B) (params []byte, fingerprint string) {
	b.Helper()
	req, err := job.DecodeSubmission(permitBody(47), jobtest.PermitTypes(b))
	require.NoError(b, err)
	return req.Params, req.Fingerprint
}

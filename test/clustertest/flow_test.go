package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/wire"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// A concurrency key's limit of 1 holds on a 3-node cluster (its places in
// a bucket of 3 replicas) with two brokers and two worker processes each
// on its own node: of the jobs of one case, never two run at once, while
// different cases run beside each other.
func TestConcurrencyKeyHoldsOnACluster(t *testing.T) {
	c := Start(t, 3)
	layout := natsjs.DefaultLayout()
	layout.Replicas = 3
	_, svc := c.Provision("service", c.URLs(), layout)
	for i := range 2 {
		_, res := c.Provision(fmt.Sprintf("broker-%d", i), c.Node(i).URL(), layout)
		startBroker(t, fmt.Sprintf("broker-%d", i), res)
	}
	var mu sync.Mutex
	inFlight, most := map[int]int{}, map[int]int{}
	total, mostTotal := 0, 0
	decl := jobtest.PermitReport()
	for i := range 2 {
		name := fmt.Sprintf("worker-%d", i)
		w, err := worker.New(worker.Config{
			Conn: c.Connect(name, c.Node(i+1).URL()), Name: name, Credential: wire.JobgateCredential, Logger: testLogger(t).With("component", name),
			HeartbeatInterval: 500 * time.Millisecond, PullWait: 500 * time.Millisecond, DrainTimeout: time.Second,
		})
		require.NoError(t, err)
		require.NoError(t, worker.Register(w, worker.Type[permitParams]{
			Name: decl.Name, Schema: decl.Schema, Concurrency: 3, Timeout: time.Minute, ContentType: decl.ContentType,
			ConcurrencyKeys: []api.ConcurrencyKey{{Key: "/params/case_id", Limit: 1}},
			Work: func(ctx context.Context, j *worker.Job[permitParams]) error {
				mu.Lock()
				inFlight[j.Params.CaseID]++
				total++
				most[j.Params.CaseID] = max(most[j.Params.CaseID], inFlight[j.Params.CaseID])
				mostTotal = max(mostTotal, total)
				mu.Unlock()
				time.Sleep(40 * time.Millisecond)
				mu.Lock()
				inFlight[j.Params.CaseID]--
				total--
				mu.Unlock()
				_, err := j.Output().Write([]byte("%PDF"))
				return err
			},
		}))
		go func() { _ = w.Start(context.Background()) }()
		t.Cleanup(func() { _ = w.Stop(context.Background()) })
	}
	env := &jobtest.Env{Secret: []byte("clustertest-flow")}
	var keys []string
	for i := range 18 {
		keys = append(keys, env.Admit(t, svc, jobtest.Request{Key: fmt.Sprintf("flow-%d", i), CaseID: 1 + i%3, Revision: 1, Pages: 1}).Key())
	}
	for _, k := range keys {
		require.Equal(t, "succeeded", string(jobtest.Terminal(t, svc, k, time.Minute).State))
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[int]int{1: 1, 2: 1, 3: 1}, most, "one job of a case at a time")
	require.Greater(t, mostTotal, 1, "cases ran beside each other")
}

package clustertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"github.com/jobgate/jobgate/internal/broker"
	"github.com/jobgate/jobgate/internal/wire"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/system"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// The result store under the faults a worker process meets on a cluster:
// started while the deployment is being provisioned, and its upload cut by
// the loss of the results stream's leader.

const resultsStream = "OBJ_" + natsjs.BucketResults

// A worker process started together with a fresh deployment (chaos: both
// renderers of a fresh deployment failed every job, "store result ...: no
// responders", for their whole life) binds the results store after the
// first provisioner created it and before that provisioner made it read
// from its stream leader (it turns direct gets off, see natsjs.Provision):
// the worker waits for the provisioning to finish, and stores results.
func TestWorkerStartedWhileProvisioningStoresResults(t *testing.T) {
	c := Start(t, 3)
	layout := natsjs.DefaultLayout()
	layout.Replicas = 3
	_, svc := c.Provision("service", c.URLs(), layout)
	// Back to the moment a provisioner has created the results store (the
	// client creates it allowing direct gets) and not yet turned direct
	// gets off.
	setAllowDirect(t, svc.JS, resultsStream, true)

	// The worker's looks at the results store's stream.
	var looks atomic.Int64
	watcher := c.Connect("watcher", c.Node(0).URL())
	_, err := watcher.Subscribe("$JS.API.STREAM.INFO."+resultsStream, func(*nats.Msg) { looks.Add(1) })
	require.NoError(t, err)
	require.NoError(t, watcher.Flush())

	// jobgate's broker, which stores results for the workers, binds while
	// direct gets are still allowed.
	startBroker(t, "broker", svc)
	rl := &renderLog{n: map[string]int{}}
	w := startWorker(t, c.Connect("worker-1", c.Node(1).URL()), "worker-1", rl, func(ctx context.Context, j *worker.Job[permitParams]) ([]byte, error) {
		return []byte("%PDF " + j.ID), nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Until the worker has started (it bound at once) or has looked at the
	// results store three times (it waits for the provisioning to finish).
	waitUntil(t, ctx, func() bool { return isClosed(w.started) || looks.Load() >= 3 })
	t.Logf("worker started: %v, looks at %s: %d", isClosed(w.started), resultsStream, looks.Load())

	// The provisioning finishes (here by a second process, as when the
	// first is slow): direct gets are off.
	c.Provision("service-2", c.Node(2).URL(), layout)
	require.False(t, streamConfig(t, svc.JS, resultsStream).AllowDirect)
	select {
	case err := <-w.startErr:
		require.NoError(t, err)
	case <-ctx.Done():
		require.FailNow(t, "worker did not start")
	}

	env := &jobtest.Env{Secret: []byte("clustertest-results")}
	rec := env.Admit(t, svc, jobtest.Request{Key: "started-while-provisioning"})
	done := jobtest.Terminal(t, svc, rec.Key(), 30*time.Second)
	requireStoredOnce(t, svc, done, rl, []byte("%PDF "+done.ID))
}

// A result upload cut by the loss of the results stream's leader (the
// node stopped mid-upload; the chunks still to come meet a stream without
// a leader, and any on their way to it are never acknowledged) is stored
// again once the stream has a new leader: the job succeeds in its first
// attempt, rendered once, with one object holding what was written (the
// upload once stalled until its deadline, TestNodeLossUnderLoad).
func TestResultUploadThroughResultsLeaderLoss(t *testing.T) {
	c := Start(t, 3)
	layout := natsjs.DefaultLayout()
	layout.Replicas = 3
	_, svc := c.Provision("service", c.URLs(), layout)
	victim := c.Leader(svc.JS, resultsStream)
	other := (victim + 1) % 3
	// The test reads through a node that stays up.
	_, svc = c.Provision("reader", c.Node(other).URL(), layout)

	startBroker(t, "broker", svc)
	part := bytes.Repeat([]byte("%PDF leader loss "), 12000) // 204 kB: two chunks and a part
	wrote, resume := make(chan struct{}), make(chan struct{})
	rl := &renderLog{n: map[string]int{}}
	w := startWorker(t, c.Connect("worker-1", c.Node(other).URL()), "worker-1", rl, func(ctx context.Context, j *worker.Job[permitParams]) ([]byte, error) {
		if _, err := j.Output().Write(part); err != nil {
			return nil, err
		}
		close(wrote)
		select {
		case <-resume:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return part, nil
	})
	require.NoError(t, <-w.startErr)

	env := &jobtest.Env{Secret: []byte("clustertest-results")}
	rec := env.Admit(t, svc, jobtest.Request{Key: "leader-loss"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	select {
	case <-wrote:
	case <-ctx.Done():
		require.FailNow(t, "the handler did not start")
	}
	c.Stop(victim)
	t.Logf("stopped node %s, leader of %s, mid-upload", c.Node(victim).Name, resultsStream)
	close(resume)
	start := time.Now()
	done := jobtest.Terminal(t, svc, rec.Key(), 45*time.Second)
	t.Logf("job %s %s %s after the node loss", done.ID, done.State, time.Since(start).Round(time.Millisecond))
	requireStoredOnce(t, svc, done, rl, append(append([]byte{}, part...), part...))
	c.Restart(victim)
}

// requireStoredOnce asserts a job that succeeded in its first attempt,
// rendered once, with one result object in the store holding want.
func requireStoredOnce(t *testing.T, res *natsjs.Resources, done *job.Record, rl *renderLog, want []byte) {
	t.Helper()
	require.Equal(t, job.StateSucceeded, done.State, "last error %+v", done.Error)
	require.Equal(t, 1, done.Attempt)
	require.Equal(t, map[string]int{done.ID: 1}, rl.counts(), "rendered once")
	require.NotNil(t, done.Output)
	require.Equal(t, done.ID+".a1", done.Output.Object)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	infos, err := res.Results.List(ctx)
	require.NoError(t, err)
	require.Len(t, infos, 1, "one result object")
	require.Equal(t, done.Output.Object, infos[0].Name)
	f, err := res.Files.Open(ctx, done.Output.Object)
	require.NoError(t, err)
	defer f.Close()
	got, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, want, got)
	sum := sha256.Sum256(want)
	require.Equal(t, hex.EncodeToString(sum[:]), done.Output.SHA256)
	require.Equal(t, int64(len(want)), done.Output.Size)
}

// startBroker runs jobgate's side of the worker protocol on res (as a
// dispatcher runs it, with the handles its own provisioning opened).
func startBroker(t *testing.T, name string, res *natsjs.Resources) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := broker.New(broker.Config{BeatInterval: 500 * time.Millisecond, StaleAfter: 2500 * time.Millisecond},
		system.BrokerStores(res), testLogger(t).With("component", name))
	require.NoError(t, err)
	require.NoError(t, b.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, b.Stop(ctx))
	})
}

type permitParams struct {
	CaseID   int `json:"case_id"`
	Revision int `json:"revision"`
	Pages    int `json:"pages"`
}

type startedWorker struct {
	started  chan struct{}
	startErr chan error
}

// startWorker starts permit_report workers (concurrency 1) on nc in the
// background; render returns the output (what it has not written itself).
func startWorker(t *testing.T, nc *nats.Conn, name string, rl *renderLog,
	render func(context.Context, *worker.Job[permitParams]) ([]byte, error)) *startedWorker {
	t.Helper()
	w, err := worker.New(worker.Config{
		Conn: nc, Name: name, Credential: wire.JobgateCredential, Logger: testLogger(t).With("component", name),
		HeartbeatInterval: 500 * time.Millisecond, PullWait: 500 * time.Millisecond, DrainTimeout: time.Second,
	})
	require.NoError(t, err)
	decl := jobtest.PermitReport()
	require.NoError(t, worker.Register(w, worker.Type[permitParams]{
		Name: decl.Name, Schema: decl.Schema, Concurrency: 1, Timeout: time.Minute,
		Work: func(ctx context.Context, j *worker.Job[permitParams]) error {
			rl.add(ctx, &job.Record{ID: j.ID})
			out, err := render(ctx, j)
			if err != nil {
				return err
			}
			_, err = j.Output().Write(out)
			return err
		},
	}))
	sw := &startedWorker{started: make(chan struct{}), startErr: make(chan error, 1)}
	var once sync.Once
	go func() {
		err := w.Start(context.Background())
		once.Do(func() { close(sw.started) })
		sw.startErr <- err
	}()
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return sw
}

func setAllowDirect(t *testing.T, js jetstream.JetStream, stream string, allow bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := streamConfig(t, js, stream)
	cfg.AllowDirect = allow
	_, err := js.UpdateStream(ctx, cfg)
	require.NoError(t, err)
}

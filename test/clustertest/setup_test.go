package clustertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/pkg/worker"

	"github.com/jobgate/jobgate/test/jobtest"

	"github.com/jobgate/jobgate/dispatcher"
	"github.com/jobgate/jobgate/gateway"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/failpoint"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/notifier"
	"github.com/jobgate/jobgate/renderer"
	"github.com/jobgate/jobgate/system"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

const (
	tenant    = "4"
	requester = "reviewer-47"
	mailAddr  = "reviewer-47@example.test"
)

var authSecret = []byte("clustertest-auth-secret")

// deployment is jobgate scaled out on a 3-node cluster: 2 gateways, 2
// renderers, 1 dispatcher and 1 notifier, each with its own connection to
// its own node, as separate processes would have.
type deployment struct {
	cluster  *Cluster
	gateways []*gateway.Gateway
	urls     []string          // gateway base URLs
	obs      *natsjs.Resources // the test's own view, on every node's URL
	renders  *renderLog
	sink     *jobtest.SMTPSink
	token    string
	// placement lists the components connected to each node.
	placement map[int][]string
}

type setupOptions struct {
	// gatewayFailpoints[i], if set, is gateway i's failpoint set.
	gatewayFailpoints map[int]*failpoint.Set
}

// setup starts the cluster, provisions R3 resources and starts every
// component on its node: gateway 1 on n1, gateway 2 on n2, dispatchers on
// n2 and n3, renderer 1 on n3, renderer 2 on n1, notifier on n3. A client given a
// single node's URL learns the others from the cluster and fails over.
func setup(t *testing.T, opts setupOptions) *deployment {
	t.Helper()
	log := testLogger(t)
	c := Start(t, 3)
	layout := natsjs.DefaultLayout()
	layout.Replicas = 3
	d := &deployment{cluster: c, renders: &renderLog{n: map[string]int{}}, sink: jobtest.NewSMTPSink(t), placement: map[int][]string{}}
	_, d.obs = c.Provision("observer", c.URLs(), layout)

	connect := func(name string, node int) *natsjs.Resources {
		d.placement[node] = append(d.placement[node], name)
		_, res := c.Provision(name, c.Node(node).URL(), layout)
		return res
	}
	ctx := context.Background()
	for i, node := range []int{0, 1} {
		g, err := gateway.New(gateway.Config{
			Addr: "127.0.0.1:0", AuthSecret: authSecret, SubmitRate: 1000, SubmitBurst: 1000,
			Failpoints: opts.gatewayFailpoints[i],
		}, system.GatewayStores(connect(fmt.Sprintf("gateway-%d", i+1), node)), log.With("component", fmt.Sprintf("gateway-%d", i+1)))
		require.NoError(t, err)
		require.NoError(t, g.Start(ctx))
		t.Cleanup(func() { _ = g.Stop(context.Background()) })
		d.gateways = append(d.gateways, g)
		d.urls = append(d.urls, "http://"+g.Addr())
	}
	// Two dispatchers, so a node's loss leaves a broker to answer the
	// workers; both before the workers, which wait for one to declare.
	for i, node := range []int{1, 2} {
		name := fmt.Sprintf("dispatcher-%d", i+1)
		// The default staleness (15 s): a worker cut off for the seconds
		// of a node's loss keeps its claim.
		disp, err := dispatcher.New(dispatcher.Config{}, system.DispatcherStores(connect(name, node)), log.With("component", name))
		require.NoError(t, err)
		require.NoError(t, disp.Start(ctx))
		t.Cleanup(func() { _ = disp.Stop(context.Background()) })
	}
	for i, node := range []int{2, 0} {
		name := fmt.Sprintf("renderer-%d", i+1)
		r, err := renderer.New(renderer.Config{Worker: name, OnRender: d.renders.add}, worker.Config{Conn: connect(name, node).JS.Conn(), Logger: log.With("component", name)})
		require.NoError(t, err)
		require.NoError(t, r.Start(ctx))
		t.Cleanup(func() { _ = r.Stop(context.Background()) })
	}
	n, err := notifier.New(notifier.Config{
		Mail: notifier.Mail{
			Host: d.sink.Host, Port: d.sink.Port, From: "jobgate@example.test",
			Addresses: map[string]string{tenant + "/" + requester: mailAddr},
		},
		Instance: "notifier-1",
	}, system.NotifierStores(connect("notifier", 2)), log.With("component", "notifier"))
	require.NoError(t, err)
	require.NoError(t, n.Start(ctx))
	t.Cleanup(func() { _ = n.Stop(context.Background()) })

	d.token, err = auth.Mint(authSecret, auth.Identity{Tenant: tenant, Requester: requester}, time.Hour, time.Now())
	require.NoError(t, err)
	return d
}

// renderLog counts render starts per job (renderer.Config.OnRender).
type renderLog struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *renderLog) add(_ context.Context, r *job.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[r.ID]++
}

func (l *renderLog) counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.n))
	for k, v := range l.n {
		out[k] = v
	}
	return out
}

// client submits with a small retry loop: the same key on every attempt,
// retried on 5xx, 429 and transport errors, each retry against the next
// gateway, as a client behind a load balancer would see it.
type client struct {
	hc    *http.Client
	urls  []string
	token string

	attempts atomic.Int64 // HTTP attempts made
	failures atomic.Int64 // attempts answered 5xx/429 or not answered
}

func (d *deployment) client() *client {
	return &client{hc: &http.Client{Timeout: 3 * time.Second}, urls: d.urls, token: d.token}
}

// answer is the definitive answer to one submission.
type answer struct {
	status   int
	id       string
	replayed bool
	attempts int
}

func permitBody(caseID int) []byte {
	return fmt.Appendf(nil, `{"type":"permit_report","params":{"case_id":%d,"revision":1,"pages":3}}`, caseID)
}

// submit posts body with key, starting at gateway first, until a 2xx (or
// another definitive 4xx) or the deadline.
func (c *client) submit(ctx context.Context, key string, body []byte, first int) (answer, error) {
	wait := 50 * time.Millisecond
	var last error
	for n := 0; ; n++ {
		base := c.urls[(first+n)%len(c.urls)]
		c.attempts.Add(1)
		a, err := c.post(ctx, base, key, body)
		if err == nil && a.status < 500 && a.status != http.StatusTooManyRequests {
			a.attempts = n + 1
			return a, nil
		}
		c.failures.Add(1)
		if err == nil {
			err = fmt.Errorf("%s answered %d", base, a.status)
		}
		last = err
		select {
		case <-ctx.Done():
			return answer{}, fmt.Errorf("key %s not confirmed after %d attempts: %w", key, n+1, last)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

func (c *client) post(ctx context.Context, base, key string, body []byte) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/jobs", bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{status: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	if resp.StatusCode/100 == 2 {
		var res job.Resource
		if err := json.Unmarshal(data, &res); err != nil {
			return answer{}, fmt.Errorf("decode job: %w", err)
		}
		a.id = res.ID
	}
	return a, nil
}

// waitTerminal polls every job until all are terminal and returns them.
func (d *deployment) waitTerminal(t *testing.T, keys map[string]string, timeout time.Duration) map[string]*job.Record {
	t.Helper()
	out := map[string]*job.Record{}
	deadline := time.Now().Add(timeout)
	for {
		for _, id := range keys {
			if r := out[id]; r != nil && r.State.Terminal() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			r, err := d.obs.Jobs.Get(ctx, job.StoreKey(tenant, requester, id))
			cancel()
			if err == nil {
				out[id] = r
			}
		}
		var pending []string
		for _, id := range keys {
			if r := out[id]; r == nil || !r.State.Terminal() {
				b, _ := json.Marshal(r)
				pending = append(pending, id+": "+string(b))
			}
		}
		if len(pending) == 0 {
			return out
		}
		if time.Now().After(deadline) {
			d.diagnose(t)
			require.FailNowf(t, "jobs not terminal", "%d of %d still pending after %s:\n%s",
				len(pending), len(keys), timeout, strings.Join(pending, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// diagnose logs the state of the work queue and the consumers, for a
// failure message.
func (d *deployment) diagnose(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, sc := range []struct{ stream, consumer string }{
		{natsjs.StreamWork, natsjs.WorkConsumerName("permit_report")}, {"KV_" + natsjs.BucketJobs, natsjs.ConsumerRelay},
		{natsjs.StreamEvents, natsjs.ConsumerNotifier},
	} {
		s, err := d.obs.JS.Stream(ctx, sc.stream)
		if err != nil {
			t.Logf("stream %s: %v", sc.stream, err)
			continue
		}
		si := s.CachedInfo()
		t.Logf("stream %s: state %+v cluster %+v", sc.stream, si.State, si.Cluster)
		c, err := s.Consumer(ctx, sc.consumer)
		if err != nil {
			t.Logf("consumer %s: %v", sc.consumer, err)
			continue
		}
		ci := c.CachedInfo()
		t.Logf("consumer %s: delivered %+v ack floor %+v pending %d ack pending %d redelivered %d waiting %d cluster %+v",
			sc.consumer, ci.Delivered, ci.AckFloor, ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting, ci.Cluster)
	}
}

// allRecords lists every job record in the bucket.
func (d *deployment) allRecords(t *testing.T) []*job.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	recs, err := d.obs.Jobs.List(ctx, tenant, "")
	require.NoError(t, err)
	return recs
}

// waitAllCurrent waits until every stream of the deployment has a leader
// and all its replicas are current.
func (d *deployment) waitAllCurrent(t *testing.T) {
	t.Helper()
	for _, s := range []string{"KV_" + natsjs.BucketJobs, "KV_" + natsjs.BucketMeta, "KV_" + natsjs.BucketNotices,
		natsjs.StreamWork, natsjs.StreamEvents, natsjs.StreamDeliveries, "OBJ_" + natsjs.BucketResults} {
		d.cluster.WaitCurrent(d.obs.JS, s, time.Minute)
	}
}

// requireObjects checks that every succeeded job's result object is stored
// with the size and digest its record names, and that no other object is.
func (d *deployment) requireObjects(t *testing.T, recs map[string]*job.Record) {
	t.Helper()
	for id, r := range recs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, err := d.obs.Results.GetInfo(ctx, r.Output.Object)
		cancel()
		require.NoErrorf(t, err, "result object of job %s", id)
		require.Equal(t, uint64(r.Output.Size), info.Size, id)
	}
	require.Equal(t, len(recs), d.resultObjects(t), "one result object per job")
}

// resultObjects counts the stored result objects.
func (d *deployment) resultObjects(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	infos, err := d.obs.Results.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0
	}
	require.NoError(t, err)
	return len(infos)
}

// testLogger sends the components' warnings and errors (or what
// CLUSTERTEST_LOG asks for) to the test log
// (until the test ends: a late line from a stopping component is dropped
// rather than logged after the test finished).
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.close)
	lvl := slog.LevelWarn
	if v := os.Getenv("CLUSTERTEST_LOG"); v != "" { // e.g. CLUSTERTEST_LOG=info
		_ = lvl.UnmarshalText([]byte(v))
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl}))
}

type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

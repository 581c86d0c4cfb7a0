package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/gateway"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/jobgate/jobgate/system"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testBundle is a real gateway and dispatcher on real embedded JetStream,
// built as serve builds them (system; no renderer: the tests drive
// the jobs), plus what a test needs to look behind it (the job store, the
// result store) and a token.
type testBundle struct {
	URL    string
	Token  string
	Secret []byte
	Res    *natsjs.Resources
	GW     *gateway.Gateway
}

// setup starts the system in a temp dir with the gateway on a free port;
// permit_report is declared as the renderer would on start, before the
// gateway. Everything stops when the test ends.
func setup(t *testing.T) *testBundle {
	t.Helper()
	secret := []byte("client-test-secret-0123456789abcdef")
	settings := config.Default()
	settings.DataDir, settings.HTTPAddr, settings.AuthSecret = t.TempDir(), "127.0.0.1:0", string(secret)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sys, err := system.Start(ctx, system.Config{Settings: &settings, LogOutput: io.Discard,
		Components: []system.Component{system.Dispatcher, system.Gateway},
		Workers:    []system.WorkerFunc{system.Declare(jobtest.PermitReport())}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sys.Stop(context.Background())) })
	tok, err := sys.Token(auth.Identity{Tenant: "4", Requester: "reviewer-47"}, time.Hour)
	require.NoError(t, err)
	return &testBundle{URL: sys.URL(), Token: tok, Secret: secret, Res: sys.Resources(), GW: sys.Gateway()}
}

// newClient makes an SDK client with a journal in the test's temp dir
// unless opts say otherwise; retries are fast.
func newClient(t *testing.T, baseURL, token string, opts ...client.Option) *client.Client {
	t.Helper()
	all := append([]client.Option{
		client.WithJournal(filepath.Join(t.TempDir(), "journal.db")),
		client.WithRetryPolicy(client.RetryPolicy{BaseDelay: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond, MaxElapsed: 20 * time.Second}),
	}, opts...)
	c, err := client.New(baseURL, token, all...)
	require.NoError(t, err)
	return c
}

// storedJobs counts the requester's jobs in the job store itself.
func (b *testBundle) storedJobs(t *testing.T) []*job.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs, err := b.Res.Jobs.List(ctx, "4", "reviewer-47")
	require.NoError(t, err)
	return recs
}

// mutate changes a stored job the way a worker would (a CAS through the
// state rules), so tests can drive a job without the renderer.
func (b *testBundle) mutate(t *testing.T, id string, fn func(r *job.Record) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := b.Res.Jobs.Mutate(ctx, job.StoreKey("4", "reviewer-47", id), fn)
	require.NoError(t, err)
}

// succeed stores data as the job's result and marks it succeeded.
func (b *testBundle) succeed(t *testing.T, id string, data []byte, announcedSHA string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := b.Res.Results.Put(ctx, jetstream.ObjectMeta{Name: id, Headers: map[string][]string{"Content-Type": {"application/pdf"}}}, bytes.NewReader(data))
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	if announcedSHA == "" {
		announcedSHA = hex.EncodeToString(sum[:])
	}
	b.mutate(t, id, func(r *job.Record) error {
		now := time.Now()
		if r.State == job.StateQueued {
			if err := r.Transition(job.StateRunning, now); err != nil {
				return err
			}
		}
		r.Output = &job.Output{Object: id, ContentType: "application/pdf", Size: int64(len(data)), SHA256: announcedSHA}
		return r.Transition(job.StateSucceeded, now)
	})
}

// proxy is an httptest-style reverse proxy in front of the gateway whose
// behaviour a test scripts per request.
type proxy struct {
	t      *testing.T
	target *url.URL
	rp     *httputil.ReverseProxy
	mu     sync.Mutex
	hook   func(w http.ResponseWriter, r *http.Request, forward func() *http.Response) bool
	seen   []string
}

func newProxy(t *testing.T, target string) *proxy {
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := &proxy{t: t, target: u, rp: httputil.NewSingleHostReverseProxy(u)}
	p.rp.FlushInterval = -1 // stream SSE through at once
	return p
}

// forward sends r to the gateway and returns its full response (body
// buffered): the server has committed whatever it does for r.
func (p *proxy) forward(r *http.Request) *http.Response {
	out := r.Clone(context.Background())
	out.URL.Scheme, out.URL.Host, out.Host, out.RequestURI = p.target.Scheme, p.target.Host, p.target.Host, ""
	body, err := io.ReadAll(r.Body)
	assert.NoError(p.t, err)
	out.Body = io.NopCloser(bytes.NewReader(body))
	// This runs in the proxy's handler goroutine: failures are reported
	// with assert (require must only run on the test's goroutine) and the
	// client gets a 502.
	resp, err := http.DefaultTransport.RoundTrip(out)
	if !assert.NoError(p.t, err) {
		return &http.Response{StatusCode: http.StatusBadGateway, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(nil))}
	}
	buf, err := io.ReadAll(resp.Body)
	assert.NoError(p.t, err)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(buf))
	return resp
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.seen = append(p.seen, r.Method+" "+r.URL.Path)
	hook := p.hook
	p.mu.Unlock()
	if hook != nil && hook(w, r, func() *http.Response { return p.forward(r) }) {
		return
	}
	p.rp.ServeHTTP(w, r)
}

func (p *proxy) setHook(h func(w http.ResponseWriter, r *http.Request, forward func() *http.Response) bool) {
	p.mu.Lock()
	p.hook = h
	p.mu.Unlock()
}

func (p *proxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// fakeClock is a Clock whose Sleep advances time instantly.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	if d > 0 {
		c.now = c.now.Add(d)
	}
	return nil
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

var permit = map[string]any{"case_id": 47, "revision": 29, "pages": 63}

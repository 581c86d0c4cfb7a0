package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/index"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/natsserver"
	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// testBundle is what a gateway test works with: the real embedded
// JetStream behind the gateway, its base URL and helpers to call it.
type testBundle struct {
	dir    string
	emb    *natsserver.Embedded
	res    *natsjs.Resources
	url    string
	secret []byte
	http   *http.Client
	clock  *testClock
	stop   func()
	// logs, when set before start, receives the gateway's log.
	logs slog.Handler
}

type testClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// setup starts an embedded JetStream in a temp dir and a gateway on a free
// port. Every response the test receives is validated against openapi.yaml.
func setup(t *testing.T, opts ...func(*Config)) (*Gateway, *testBundle) {
	t.Helper()
	b := &testBundle{dir: t.TempDir(), secret: []byte("test-secret"), clock: &testClock{}}
	g := b.start(t, opts...)
	return g, b
}

func (b *testBundle) start(t *testing.T, opts ...func(*Config)) *Gateway {
	t.Helper()
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: b.dir})
	require.NoError(t, err)
	nc, err := emb.Connect("gateway-test")
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := natsjs.Provision(ctx, js, natsjs.DefaultLayout())
	require.NoError(t, err)
	jobtest.DeclareTypes(t, res) // as the renderer would, on start
	cfg := Config{Addr: "127.0.0.1:0", AuthSecret: b.secret, Now: b.clock.now, ReadRate: 1000, ReadBurst: 1000}
	for _, o := range opts {
		o(&cfg)
	}
	logs := b.logs
	if logs == nil {
		logs = slog.NewTextHandler(io.Discard, nil)
	}
	g, err := New(cfg, storesOf(res), slog.New(logs))
	require.NoError(t, err)
	require.NoError(t, g.Start(ctx))
	b.emb, b.res = emb, res
	b.url = "http://" + g.Addr()
	// A transport of the bundle's own, whose idle keep-alive connections
	// Stop's drain would otherwise wait on (seen on CI: its 10 s ran out).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	b.http = &http.Client{
		Transport:     &validatingTransport{t: t, next: tr, router: specRouter(t, b.url)},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		tr.CloseIdleConnections()
		require.NoError(t, g.Stop(context.Background()))
		nc.Close()
		emb.Shutdown()
	}
	t.Cleanup(stop)
	b.stop = stop
	return g
}

// storesOf is system's gatewayStores, which this package's tests
// cannot import (it imports the gateway).
func storesOf(res *natsjs.Resources) Stores {
	return Stores{
		Jobs: res.Jobs, Work: res.Work, Events: res.Events, Secrets: res.Secrets, Files: res.Files, Types: res.Types,
		Batches: res.Batches, Storage: res, Changes: res.Jobs, Log: index.StoreSource(res.Jobs), Slots: res.Slots,
	}
}

func (b *testBundle) token(t *testing.T, tenant, sub string, admin bool) string {
	t.Helper()
	tok, err := auth.Mint(b.secret, auth.Identity{Tenant: tenant, Requester: sub, Admin: admin}, time.Hour, time.Now())
	require.NoError(t, err)
	return tok
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

func (r response) job(t *testing.T) job.Resource {
	t.Helper()
	var res job.Resource
	require.NoError(t, json.Unmarshal(r.body, &res), "body: %s", r.body)
	return res
}

// do sends one request; headers are "Name: value" strings.
func (b *testBundle) do(t *testing.T, method, path, token, body string, headers ...string) response {
	t.Helper()
	r, err := b.try(method, path, token, body, headers...)
	require.NoError(t, err)
	return r
}

// try is do without failing the test, for goroutines other than the test's
// (require must not be called there): the caller checks the error.
func (b *testBundle) try(method, path, token, body string, headers ...string) (response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, b.url+path, rd)
	if err != nil {
		return response{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Add(k, v)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

func (b *testBundle) submit(t *testing.T, token, key, body string) response {
	t.Helper()
	return b.do(t, http.MethodPost, "/v1/jobs", token, body, "Idempotency-Key: "+key)
}

// countJobs counts the records in the bucket, whatever their scope.
func (b *testBundle) countJobs(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys, err := b.res.Jobs.KV().ListKeys(ctx)
	require.NoError(t, err)
	n := 0
	for range keys.Keys() {
		n++
	}
	return n
}

const permit = `{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":63}}`

// specRouter loads openapi.yaml and points it at the test server.
func specRouter(t *testing.T, base string) routers.Router {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	doc.Servers = openapi3.Servers{{URL: base}}
	r, err := gorillamux.NewRouter(doc)
	require.NoError(t, err)
	return r
}

// validatingTransport checks every response against the OpenAPI document,
// and every request that the server accepted, so the document cannot drift
// from the code.
type validatingTransport struct {
	t      *testing.T
	next   http.RoundTripper
	router routers.Router
}

func (v *validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		var err error
		if reqBody, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := v.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, nil // streamed; checked event by event in the SSE tests
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))

	vreq := req.Clone(req.Context())
	vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := v.router.FindRoute(vreq)
	if err != nil {
		if resp.StatusCode != http.StatusNotFound { // unknown paths are not in the document
			v.t.Errorf("openapi: no route for %s %s: %v", req.Method, req.URL.Path, err)
		}
		return resp, nil
	}
	in := &openapi3filter.RequestValidationInput{
		Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	if resp.StatusCode < 400 {
		if err := openapi3filter.ValidateRequest(req.Context(), in); err != nil {
			v.t.Errorf("openapi: request %s %s does not match: %v", req.Method, req.URL.Path, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		v.t.Errorf("openapi: response %d to %s %s does not match: %v", resp.StatusCode, req.Method, req.URL.Path, err)
	}
	return resp, nil
}

package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/internal/job"
	"github.com/jobgate/jobgate/renderer"
	jgsystem "github.com/jobgate/jobgate/system"
	"github.com/stretchr/testify/require"
)

// webhookSecret is a Standard Webhooks secret: "whsec_" + base64 of the key.
const webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// system is jobgate as `jobgate serve` runs it, in-process through
// system: embedded JetStream, notifier (one webhook for tenant 4),
// dispatcher, renderer and gateway, all sharing one metrics registry.
// Clients reach the gateway through a recording proxy (url), or directly
// (direct).
type system struct {
	url    string
	direct string
	secret []byte
	hooks  *hookReceiver
	proxy  *recordingProxy
	logs   *logBuffer
	// release lets held renders go (see startSystem).
	release func()
}

// startSystem starts the system; with heldRenders every render waits at its
// start until sys.release(), so a client can connect while a job runs.
func startSystem(t *testing.T, heldRenders bool) *system {
	t.Helper()
	sys := &system{secret: []byte("interop-secret"), hooks: &hookReceiver{failFirst: 1}, logs: &logBuffer{}}
	gate := make(chan struct{})
	var once sync.Once
	sys.release = func() { once.Do(func() { close(gate) }) }
	if !heldRenders {
		sys.release()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hookSrv := httptest.NewServer(sys.hooks)

	settings := config.Default()
	settings.DataDir, settings.HTTPAddr, settings.AuthSecret = t.TempDir(), "127.0.0.1:0", string(sys.secret)
	settings.Gateway.ReadRate, settings.Gateway.ReadBurst = 1000, 1000
	settings.Notifier.Webhooks = map[string][]config.Webhook{"4": {{URL: hookSrv.URL + "/hooks/jobgate", Secret: webhookSecret}}}
	settings.Notifier.AllowPrivateWebhooks = true // the receiver is on loopback
	settings.Notifier.WebhookRetries = []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}
	js, err := jgsystem.Start(ctx, jgsystem.Config{Settings: &settings, LogOutput: sys.logs,
		Renderer: func(c *renderer.Config) {
			c.DrainTimeout = time.Second
			c.OnRender = func(context.Context, *job.Record) {
				select {
				case <-gate:
				case <-time.After(time.Minute): // a failed test must not wedge the renderer
				}
			}
		}})
	require.NoError(t, err, "%s", sys.logs)
	sys.direct = js.URL()
	target, err := url.Parse(sys.direct)
	require.NoError(t, err)
	sys.proxy = newRecordingProxy(target)
	proxySrv := httptest.NewServer(sys.proxy)
	sys.url = proxySrv.URL

	t.Cleanup(func() {
		sys.release()
		proxySrv.Close()
		require.NoError(t, js.Stop(context.Background()))
		hookSrv.Close()
		if t.Failed() {
			t.Logf("system logs:\n%s", sys.logs.String())
		}
	})
	return sys
}

func (s *system) token(t *testing.T, tenant, subject string) string {
	t.Helper()
	tok, err := auth.Mint(s.secret, auth.Identity{Tenant: tenant, Requester: subject}, time.Hour, time.Now())
	require.NoError(t, err)
	return tok
}

// call sends one request straight to the gateway.
func (s *system) call(t *testing.T, method, path, tok, body string, header ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.direct+path, rd)
	require.NoError(t, err)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range header {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, data
}

func (s *system) submit(t *testing.T, tok, key, body string) job.Resource {
	t.Helper()
	status, data := s.call(t, http.MethodPost, "/v1/jobs", tok, body, "Idempotency-Key: "+key)
	require.Equal(t, http.StatusAccepted, status, "%s", data)
	var r job.Resource
	require.NoError(t, json.Unmarshal(data, &r))
	return r
}

// waitTerminal polls the job until it is terminal.
func (s *system) waitTerminal(t *testing.T, tok, id string) job.Resource {
	t.Helper()
	var r job.Resource
	require.Eventually(t, func() bool {
		status, data := s.call(t, http.MethodGet, "/v1/jobs/"+id, tok, "")
		if status != http.StatusOK || json.Unmarshal(data, &r) != nil {
			return false
		}
		return r.State.Terminal()
	}, 60*time.Second, 50*time.Millisecond, "job %s never finished", id)
	return r
}

// delivery is one webhook request as the receiver got it.
type delivery struct {
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	status  int
}

// hookReceiver records every webhook delivery; the first failFirst
// deliveries are answered 503, so the notifier retries them.
type hookReceiver struct {
	mu        sync.Mutex
	failFirst int
	got       []delivery
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d := delivery{Headers: map[string]string{}, Body: string(body), status: http.StatusNoContent}
	for _, k := range []string{"webhook-id", "webhook-timestamp", "webhook-signature", "content-type"} {
		d.Headers[k] = r.Header.Get(k)
	}
	h.mu.Lock()
	if len(h.got) < h.failFirst {
		d.status = http.StatusServiceUnavailable
	}
	h.got = append(h.got, d)
	h.mu.Unlock()
	w.WriteHeader(d.status)
}

func (h *hookReceiver) deliveries() []delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]delivery(nil), h.got...)
}

// streamRequest is one request for an event stream as the proxy saw it.
type streamRequest struct {
	path        string
	lastEventID string
	status      int
}

// recordingProxy forwards everything to the gateway and records each event
// stream request with the status it was answered.
type recordingProxy struct {
	rp      *httputil.ReverseProxy
	mu      sync.Mutex
	streams []streamRequest
}

func newRecordingProxy(target *url.URL) *recordingProxy {
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1 // events go out as they come
	return &recordingProxy{rp: rp}
}

func (p *recordingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/events") {
		p.rp.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	p.mu.Lock()
	i := len(p.streams)
	p.streams = append(p.streams, streamRequest{path: r.URL.Path, lastEventID: r.Header.Get("Last-Event-ID")})
	p.mu.Unlock()
	sw.onStatus = func(code int) {
		p.mu.Lock()
		p.streams[i].status = code
		p.mu.Unlock()
	}
	p.rp.ServeHTTP(sw, r)
}

func (p *recordingProxy) streamRequests() []streamRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]streamRequest(nil), p.streams...)
}

type statusWriter struct {
	http.ResponseWriter
	onStatus func(int)
	wrote    bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.onStatus(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// missing skips the test when a third-party runtime is not installed here,
// and fails it under CI=true, where the suite must really run.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and "+format+"; scripts/ensure-interop.sh installs it", args...)
	}
	t.Skipf(format+"; `make test` installs it (scripts/ensure-interop.sh), or install it by hand", args...)
}

// nodeDir is the directory of the pinned Node.js clients, after checking
// that node (18.17 or later) and the named packages are installed.
func nodeDir(t *testing.T, packages ...string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node is not installed (Debian: apt-get install nodejs npm)")
	}
	out, err := exec.Command(node, "--version").Output()
	require.NoError(t, err)
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, _ := strconv.Atoi(strings.Split(v, ".")[0])
	if major < 18 {
		missing(t, "node %s is too old (18.17 or later needed)", v)
	}
	dir, err := filepath.Abs("node")
	require.NoError(t, err)
	for _, p := range packages {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p, "package.json")); err != nil {
			missing(t, "the npm package %s is not installed in %s (npm ci there)", p, dir)
		}
	}
	return dir
}

// runNode runs a script of the node directory with a deadline and returns
// its standard output as JSON lines.
func runNode(t *testing.T, dir string, timeout time.Duration, stdin []byte, args ...string) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, err, "node %v: %s\nstdout:\n%s", args, stderr.String(), stdout.String())
	var lines []map[string]any
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "node printed %q", sc.Text())
		lines = append(lines, m)
	}
	return lines
}

package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jobgate/jobgate/internal/childproc"
	"github.com/stretchr/testify/require"
)

// freeAddr is a loopback address with a free port.
func freeAddr(t T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

type syncBuffer = childproc.Buffer

// event is one JSON line a worker printed.
type event map[string]any

func (e event) str(k string) string { s, _ := e[k].(string); return s }
func (e event) num(k string) int    { f, _ := e[k].(float64); return int(f) }

// proc is a child process: a worker printing events, or jobgate.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{}
	err    error

	mu     sync.Mutex
	events []event
	raw    []string
}

func start(t T, name, dir string, env []string, prog string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(prog, args...)
	p.cmd.Dir = dir
	p.cmd.Env = env
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start(), name)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			var e event
			p.mu.Lock()
			p.raw = append(p.raw, line)
			if json.Unmarshal([]byte(line), &e) == nil {
				p.events = append(p.events, e)
			}
			p.mu.Unlock()
		}
	}()
	go func() {
		<-read
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop(10 * time.Second)
		if t.Failed() {
			p.mu.Lock()
			out := strings.Join(p.raw, "\n")
			p.mu.Unlock()
			t.Logf("%s (pid %d) stdout:\n%s\nstderr:\n%s", p.name, p.cmd.Process.Pid, out, tail(p.stderr.String(), 20000))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// stop ends the process: SIGTERM, then SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// find returns the events that match.
func (p *proc) find(match func(event) bool) []event {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []event
	for _, e := range p.events {
		if match(e) {
			out = append(out, e)
		}
	}
	return out
}

// wait waits for an event that matches.
func (p *proc) wait(t T, timeout time.Duration, what string, match func(event) bool) event {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if got := p.find(match); len(got) > 0 {
			return got[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %s within %s", p.name, what, timeout)
		}
		if !p.alive() {
			if got := p.find(match); len(got) > 0 {
				return got[0]
			}
			t.Fatalf("%s exited (%v) before %s\nstderr:\n%s", p.name, p.err, what, tail(p.stderr.String(), 4000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// started returns the handler's "started" events of a job once at least n
// have been read: a handler writes its line before it answers, but the
// harness reads the pipe on its own, so the job can be seen terminal first.
func (p *proc) started(t T, id string, n int) []event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := p.find(eventOf("started", id))
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func eventOf(kind, id string) func(event) bool {
	return func(e event) bool { return e.str("event") == kind && (id == "" || e.str("id") == id) }
}

// deployment is a running `jobgate serve` with the conformance suite's
// worker credentials.
type deployment struct {
	bin     string // the jobgate binary
	dataDir string
	base    string // http://addr
	natsURL string
	serve   *proc
}

// conformanceQuota is the deployment's result quota per tenant.
const conformanceQuota = 4 << 20

func startDeployment(t T, bin string, env ...string) *deployment {
	t.Helper()
	d := &deployment{bin: bin, dataDir: filepath.Join(t.TempDir(), "data")}
	addr, natsAddr := freeAddr(t), freeAddr(t)
	d.base, d.natsURL = "http://"+addr, "nats://"+natsAddr
	// Each tenant may store 4 MiB of results: scenarioQuotaRefused's result
	// passes it, every other scenario's fits.
	d.serve = start(t, "jobgate serve", filepath.Dir(bin), childproc.Env(append([]string{"JOBGATE_TENANT_RESULTS_MAX_BYTES=" + strconv.Itoa(conformanceQuota)}, env...)...), bin,
		"serve", "--data-dir", d.dataDir, "--http-addr", addr, "--nats-listen", natsAddr)
	waitReady(t, d)
	return d
}

// jobgate runs a client subcommand of the binary against the data dir.
func (d *deployment) jobgate(t T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(d.bin, append(args[:1:1], append([]string{"--data-dir", d.dataDir}, args[1:]...)...)...)
	cmd.Env = childproc.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "jobgate %v: %s", args, stderr.String())
	return out
}

// Credential is a worker credential of `jobgate nats-user --worker`.
type Credential struct {
	User       string `json:"user"`
	Password   string `json:"password"`
	Credential string `json:"credential"`
}

func (d *deployment) workerCredential(t T, types ...string) Credential {
	t.Helper()
	args := []string{"nats-user", "--worker", "--json"}
	for _, typ := range types {
		args = append(args, "--type", typ)
	}
	var c Credential
	require.NoError(t, json.Unmarshal(d.jobgate(t, args...), &c))
	require.NotEmpty(t, c.User)
	require.NotEmpty(t, c.Password)
	return c
}

// client is a user of the HTTP API: one tenant's requester.
type client struct {
	d     *deployment
	token string
}

func (d *deployment) client(t T, tenant, subject string) *client {
	t.Helper()
	tok := strings.TrimSpace(string(d.jobgate(t, "token", "--tenant", tenant, "--subject", subject)))
	require.NotEmpty(t, tok)
	return &client{d: d, token: tok}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

var noRedirect = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func (c *client) do(t T, method, path, body string, header ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	for try := 0; ; try++ {
		req, err := http.NewRequest(method, c.d.base+path, rd)
		require.NoError(t, err)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for _, h := range header {
			k, v, _ := strings.Cut(h, ": ")
			req.Header.Set(k, v)
		}
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		if resp.StatusCode == http.StatusTooManyRequests && try < 20 {
			// A user's client waits as told.
			time.Sleep(250 * time.Millisecond)
			if body != "" {
				rd = strings.NewReader(body)
			}
			continue
		}
		return response{status: resp.StatusCode, header: resp.Header, body: data}
	}
}

// jobView is the job resource as the suite reads it.
type jobView struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	State    string `json:"state"`
	Attempt  int    `json:"attempt"`
	RetryAt  string `json:"retry_at"`
	Progress *struct {
		Done  int    `json:"done"`
		Total int    `json:"total"`
		Unit  string `json:"unit"`
	} `json:"progress"`
	Error *struct {
		Category  string `json:"category"`
		Message   string `json:"message"`
		Retryable bool   `json:"retryable"`
	} `json:"error"`
	Result *struct {
		Href        string `json:"href"`
		ContentType string `json:"content_type"`
		Size        int64  `json:"size"`
		SHA256      string `json:"sha256"`
	} `json:"result"`
	etag string
}

func (j jobView) terminal() bool {
	return j.State == "succeeded" || j.State == "failed" || j.State == "canceled"
}

// submit admits a job of typ, waiting (as a deployment's new user would)
// until the gateway knows the type its worker just declared.
func (c *client) submit(t T, typ string, params any, headers ...string) jobView {
	t.Helper()
	p, err := json.Marshal(params)
	require.NoError(t, err)
	body := fmt.Sprintf(`{"type":%q,"params":%s}`, typ, p)
	key := fmt.Sprintf("conf-%s-%d", typ, time.Now().UnixNano())
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := c.do(t, http.MethodPost, "/v1/jobs", body, append([]string{"Idempotency-Key: " + key}, headers...)...)
		if r.status == http.StatusAccepted {
			var j jobView
			require.NoError(t, json.Unmarshal(r.body, &j))
			require.Equal(t, "/v1/jobs/"+j.ID, r.header.Get("Location"))
			return j
		}
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
		require.True(t, time.Now().Before(deadline), "type %s never accepted: %s", typ, r.body)
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *client) job(t T, id string) jobView {
	t.Helper()
	r := c.do(t, http.MethodGet, "/v1/jobs/"+id, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var j jobView
	require.NoError(t, json.Unmarshal(r.body, &j))
	j.etag = r.header.Get("ETag")
	return j
}

// until polls the job until cond holds.
func (c *client) until(t T, id string, timeout time.Duration, what string, cond func(jobView) bool) jobView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j := c.job(t, id)
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: not %s within %s; now %+v", id, what, timeout, j)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *client) terminal(t T, id string, timeout time.Duration) jobView {
	t.Helper()
	return c.until(t, id, timeout, "terminal", jobView.terminal)
}

// download fetches a succeeded job's result as a user does: the 303 to the
// signed link, then the file.
func (c *client) download(t T, id string) response {
	t.Helper()
	r := c.do(t, http.MethodGet, "/v1/jobs/"+id+"/result", "")
	require.Equal(t, http.StatusSeeOther, r.status, "%s", r.body)
	loc := r.header.Get("Location")
	require.NotEmpty(t, loc)
	resp, err := noRedirect.Get(c.d.base + loc)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// typeInfo reads GET /v1/types/{name}.
type typeInfo struct {
	Name           string          `json:"name"`
	Schema         json.RawMessage `json:"schema"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	Attempts       int             `json:"attempts"`
	MaxResultBytes int64           `json:"max_result_bytes"`
	ContentType    string          `json:"content_type"`
	Workers        int             `json:"workers"`
}

func (c *client) typeInfo(t T, name string) (typeInfo, bool) {
	t.Helper()
	r := c.do(t, http.MethodGet, "/v1/types/"+name, "")
	if r.status == http.StatusNotFound {
		return typeInfo{}, false
	}
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var ti typeInfo
	require.NoError(t, json.Unmarshal(r.body, &ti))
	return ti, true
}

func (c *client) untilWorkers(t T, typ string, timeout time.Duration, cond func(int) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ti, _ := c.typeInfo(t, typ)
		if cond(ti.Workers) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("type %s: workers %d within %s", typ, ti.Workers, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/dispatcher"
	"github.com/jobgate/jobgate/examples/csv-export/sales"
	"github.com/jobgate/jobgate/gateway"
	"github.com/jobgate/jobgate/internal/auth"
	"github.com/jobgate/jobgate/internal/natsjs"
	"github.com/jobgate/jobgate/internal/schema"
	"github.com/jobgate/jobgate/pkg/job"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// TestTypeDeclares: the worker package takes the declaration, and the
// params schema is one every gateway accepts (compiled as the gateway
// compiles it: bounded strings and arrays, a valid default).
func TestTypeDeclares(t *testing.T) {
	t.Parallel()
	w, err := worker.New(worker.Config{})
	require.NoError(t, err)
	require.NoError(t, worker.Register(w, exportType()))
	_, err = schema.Compile(sales.Schema)
	require.NoError(t, err)
}

// deployment is jobgate as `jobgate serve --nats-listen` runs it: an
// embedded JetStream that also accepts outside NATS clients with derived
// credentials, the dispatcher and a gateway, all in this process; the
// worker is this example's run, connecting over TCP with the worker's
// credentials as `jobgate nats-user --worker` prints them.
type deployment struct {
	url    string // the gateway
	secret []byte // of bearer tokens
	logs   *logBuffer
}

func startDeployment(t testing.TB) *deployment {
	t.Helper()
	d := &deployment{secret: []byte("csv-export-test-secret"), logs: &logBuffer{}}
	log := slog.New(slog.NewTextHandler(d.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runCtx, stopRun := context.WithCancel(context.Background())

	natsSecret := make([]byte, 32)
	_, _ = rand.Read(natsSecret)
	tenantAuth, err := natsjs.NewTenantAuth(natsSecret)
	require.NoError(t, err)
	emb, err := natsjs.StartEmbedded(natsjs.EmbeddedConfig{
		StoreDir: filepath.Join(t.TempDir(), "nats"), Listen: "127.0.0.1:-1", Configure: tenantAuth.Configure,
	})
	require.NoError(t, err)
	nc, err := emb.Connect("csv-export-test")
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	res, err := natsjs.Provision(ctx, js, natsjs.DefaultLayout())
	require.NoError(t, err)
	disp, err := dispatcher.New(dispatcher.Config{}, res, log.With("component", "dispatcher"))
	require.NoError(t, err)
	require.NoError(t, disp.Start(runCtx))
	gw, err := gateway.New(gateway.Config{Addr: "127.0.0.1:0", AuthSecret: d.secret}, res, log.With("component", "gateway"))
	require.NoError(t, err)
	require.NoError(t, gw.Start(runCtx))
	d.url = "http://" + gw.Addr()

	// The example itself, as its main runs it.
	var workers sync.WaitGroup
	workers.Add(1)
	go func() {
		defer workers.Done()
		user, err := natsjs.WorkerUser([]string{exportType().Name})
		require.NoError(t, err)
		cfg := worker.Config{URL: emb.ClientURL(), User: user, Password: natsjs.WorkerPassword(natsSecret, user),
			Name: "csv-export-test", Logger: log.With("component", "csv-export")}
		if err := run(runCtx, cfg); err != nil {
			log.Error("csv-export ended", "err", err)
		}
	}()

	t.Cleanup(func() {
		stopRun()
		workers.Wait()
		gw.Stop()
		disp.Stop()
		nc.Close()
		emb.Shutdown()
		if t.Failed() {
			t.Logf("deployment logs:\n%s", d.logs.String())
		}
	})
	return d
}

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

func (d *deployment) token(t testing.TB) string {
	t.Helper()
	tok, err := auth.Mint(d.secret, auth.Identity{Tenant: "4", Requester: "analyst-7"}, time.Hour, time.Now())
	require.NoError(t, err)
	return tok
}

// do sends a request with the bearer token and returns the status, the
// headers and the body.
func (d *deployment) do(t testing.TB, method, path, body string, header http.Header) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, d.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+d.token(t))
	for k, v := range header {
		req.Header[k] = v
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b
}

func (d *deployment) submit(t testing.TB, key string, params any) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"type": sales.TypeName, "params": params})
	require.NoError(t, err)
	status, _, b := d.do(t, http.MethodPost, "/v1/jobs", string(body),
		http.Header{"Idempotency-Key": {key}, "Content-Type": {"application/json"}})
	return status, b
}

// waitForType polls GET /v1/types until the worker's declaration is there.
func (d *deployment) waitForType(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, _, body := d.do(t, http.MethodGet, "/v1/types", "", nil)
		if status == http.StatusOK && bytes.Contains(body, []byte(`"`+sales.TypeName+`"`)) {
			return
		}
		require.True(t, time.Now().Before(deadline), "type not declared within 30s: %d %s", status, body)
		time.Sleep(50 * time.Millisecond)
	}
}

// terminal polls the job until it is terminal, keeping the progress seen.
func (d *deployment) terminal(t testing.TB, id string, timeout time.Duration) (job.Resource, []job.Progress) {
	t.Helper()
	var seen []job.Progress
	deadline := time.Now().Add(timeout)
	for {
		status, _, body := d.do(t, http.MethodGet, "/v1/jobs/"+id, "", nil)
		require.Equal(t, http.StatusOK, status, "%s", body)
		var r job.Resource
		require.NoError(t, json.Unmarshal(body, &r))
		if r.Progress != nil && (len(seen) == 0 || seen[len(seen)-1] != *r.Progress) {
			seen = append(seen, *r.Progress)
		}
		if r.State.Terminal() {
			return r, seen
		}
		require.True(t, time.Now().Before(deadline), "job %s not terminal within %s: %s", id, timeout, body)
		time.Sleep(100 * time.Millisecond)
	}
}

// TestExportEndToEnd submits an export of ~18 MB over HTTP, follows it and
// downloads it: the file is the export the params describe, row for row,
// with the declared content type.
func TestExportEndToEnd(t *testing.T) {
	t.Parallel()
	d := startDeployment(t)
	d.waitForType(t)

	params := sales.Params{Region: "North", From: "2024-01-01", To: "2025-12-31", Currency: "EUR"}
	want := localExport(t, params)
	require.Greater(t, len(want.data), 15<<20, "the test is about tens of MB")

	status, body := d.submit(t, "export-north-2024-2025", params)
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	var admitted job.Resource
	require.NoError(t, json.Unmarshal(body, &admitted))

	done, progress := d.terminal(t, admitted.ID, 3*time.Minute)
	require.Equal(t, job.StateSucceeded, done.State, "%+v", done.Error)
	require.Equal(t, 1, done.Attempt)
	require.Equal(t, &job.Progress{Done: int(want.rows), Total: int(want.rows), Unit: "rows"}, done.Progress)
	for _, p := range progress {
		require.Equal(t, "rows", p.Unit)
		require.Equal(t, int(want.rows), p.Total)
	}
	require.NotNil(t, done.Result)
	require.Equal(t, sales.ContentType, done.Result.ContentType)
	require.Equal(t, int64(len(want.data)), done.Result.Size)

	// GET .../result: 303 to the signed link, which serves the file.
	status, header, _ := d.do(t, http.MethodGet, "/v1/jobs/"+admitted.ID+"/result", "", nil)
	require.Equal(t, http.StatusSeeOther, status)
	resp, err := http.Get(d.url + header.Get("Location"))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, sales.ContentType, resp.Header.Get("Content-Type"))
	// Count the rows while streaming the download through a hash.
	h := sha256.New()
	lines := 0
	sc := bufio.NewScanner(io.TeeReader(resp.Body, h))
	for sc.Scan() {
		lines++
	}
	require.NoError(t, sc.Err())
	require.Equal(t, int(want.rows)+1, lines, "a header and the rows")
	require.Equal(t, want.sum, [32]byte(h.Sum(nil)), "the download is the export, byte for byte")
}

type localFile struct {
	data []byte
	rows int64
	sum  [32]byte
}

func localExport(t testing.TB, p sales.Params) localFile {
	t.Helper()
	e, err := sales.New(p)
	require.NoError(t, err)
	var buf bytes.Buffer
	n, err := e.Write(context.Background(), &buf, nil)
	require.NoError(t, err)
	return localFile{data: buf.Bytes(), rows: n, sum: sha256.Sum256(buf.Bytes())}
}

// TestExportRefusals: what the schema refuses is a 422 naming the field
// (the key stays unused); what only the handler can tell fails the job at
// once, without a retry.
func TestExportRefusals(t *testing.T) {
	t.Parallel()
	d := startDeployment(t)
	d.waitForType(t)

	for name, params := range map[string]map[string]any{
		"formula region": {"region": "=HYPERLINK(1)", "from": "2025-01-01", "to": "2025-01-31"},
		"unknown field":  {"region": "North", "from": "2025-01-01", "to": "2025-01-31", "limit": 5},
		"no from":        {"region": "North", "to": "2025-01-31"},
		"bad currency":   {"region": "North", "from": "2025-01-01", "to": "2025-01-31", "currency": "JPY"},
		"bad product":    {"region": "North", "from": "2025-01-01", "to": "2025-01-31", "products": []string{"chair"}},
		"long region":    {"region": strings.Repeat("a", 65), "from": "2025-01-01", "to": "2025-01-31"},
	} {
		status, body := d.submit(t, "refused-"+strings.ReplaceAll(name, " ", "-"), params)
		require.Equal(t, http.StatusUnprocessableEntity, status, "%s: %s", name, body)
		require.Contains(t, string(body), "/problems/validation", name)
	}

	status, body := d.submit(t, "backwards", map[string]any{"region": "North", "from": "2025-02-01", "to": "2025-01-01"})
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	var admitted job.Resource
	require.NoError(t, json.Unmarshal(body, &admitted))
	done, _ := d.terminal(t, admitted.ID, time.Minute)
	require.Equal(t, job.StateFailed, done.State)
	require.Equal(t, 1, done.Attempt, "a permanent failure is not retried")
	require.NotNil(t, done.Error)
	require.False(t, done.Error.Retryable)
	require.Contains(t, done.Error.Message, "before from", fmt.Sprintf("%+v", done.Error))
}

// BenchmarkExportEndToEnd is one ~18 MB export from POST to downloaded
// file: admission, the worker's claim, generation streamed into the result
// store, the job's last write, the signed link and the download.
func BenchmarkExportEndToEnd(b *testing.B) {
	d := startDeployment(b)
	d.waitForType(b)
	params := sales.Params{Region: "North", From: "2024-01-01", To: "2025-12-31"}
	want := localExport(b, params)
	b.SetBytes(int64(len(want.data)))
	i := 0
	for b.Loop() {
		i++
		status, body := d.submit(b, fmt.Sprintf("bench-%d", i), params)
		if status != http.StatusAccepted {
			b.Fatalf("submit: %d %s", status, body)
		}
		var admitted job.Resource
		require.NoError(b, json.Unmarshal(body, &admitted))
		done, _ := d.terminal(b, admitted.ID, 3*time.Minute)
		if done.State != job.StateSucceeded {
			b.Fatalf("job ended %s", done.State)
		}
		status, header, _ := d.do(b, http.MethodGet, "/v1/jobs/"+admitted.ID+"/result", "", nil)
		require.Equal(b, http.StatusSeeOther, status)
		resp, err := http.Get(d.url + header.Get("Location"))
		require.NoError(b, err)
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.NoError(b, err)
		require.Equal(b, int64(len(want.data)), n)
	}
}

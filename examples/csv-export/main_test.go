package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/examples/csv-export/sales"
	"github.com/jobgate/jobgate/pkg/api"
	"github.com/jobgate/jobgate/pkg/client"
	"github.com/jobgate/jobgate/pkg/worker"
	"github.com/jobgate/jobgate/pkg/workertest"
	"github.com/jobgate/jobgate/pkg/workertest/jobgatetest"
	"github.com/stretchr/testify/require"
)

// TestTypeDeclares: the worker package takes the declaration, and the
// params schema is one every gateway accepts (workertest compiles it as
// the gateway does, bounded strings and arrays, a valid default, and
// admits params with it).
func TestTypeDeclares(t *testing.T) {
	t.Parallel()
	w, err := worker.New(worker.Config{})
	require.NoError(t, err)
	require.NoError(t, worker.Register(w, exportType()))
	_, err = workertest.Run(t.Context(), exportType(), map[string]any{"region": "North", "from": "2025-01-01", "to": "2025-01-01"})
	require.NoError(t, err)
}

// TestExportHandler runs the handler alone, in process: one day's export
// is the CSV sales.Export writes, with progress in rows; a range the schema
// allows but no export serves fails at once, for the user to read.
func TestExportHandler(t *testing.T) {
	t.Parallel()
	params := sales.Params{Region: "North", From: "2025-01-01", To: "2025-01-02", Currency: "EUR"}
	want := localExport(t, params)
	res, err := workertest.Run(t.Context(), exportType(), params)
	require.NoError(t, err)
	require.Equal(t, workertest.Succeeded, res.Outcome, "%+v", res.Err)
	require.Equal(t, want.sum, sha256.Sum256(res.Output), "the output is the export, byte for byte")
	require.Equal(t, &api.Progress{Done: int(want.rows), Total: int(want.rows), Unit: "rows"}, res.Progress)

	res, err = workertest.Run(t.Context(), exportType(), map[string]any{"region": "North", "from": "2025-02-01", "to": "2025-01-01"})
	require.NoError(t, err)
	require.Equal(t, workertest.Failed, res.Outcome, "a permanent failure is not retried")
	require.Contains(t, res.Error.Message, "before from")

	_, err = workertest.Run(t.Context(), exportType(), map[string]any{"region": "=HYPERLINK(1)", "from": "2025-01-01", "to": "2025-01-31"})
	require.ErrorIs(t, err, api.ErrValidation, "the schema refuses a formula")
}

// deployment is jobgate as `jobgate serve --nats-listen` runs it, in this
// process (pkg/workertest/jobgatetest): the worker is this example's run, connecting
// over TCP with the worker's credentials as `jobgate nats-user --worker
// --type export_sales_report` prints them; the test is a client of the
// HTTP API (pkg/client, and net/http for the raw answers).
type deployment struct {
	*jobgatetest.Deployment
	client *client.Client
	token  string
}

func startDeployment(t testing.TB) *deployment {
	t.Helper()
	jg := jobgatetest.Start(t)
	creds, err := jg.WorkerCredentials(exportType().Name)
	require.NoError(t, err)
	tok, err := jg.Token("4", "analyst-7")
	require.NoError(t, err)
	c, err := client.New(jg.URL(), tok, client.WithoutJournal())
	require.NoError(t, err)
	d := &deployment{Deployment: jg, client: c, token: tok}

	// The example itself, as its main runs it.
	runCtx, stopRun := context.WithCancel(context.Background())
	var workers sync.WaitGroup
	workers.Add(1)
	go func() {
		defer workers.Done()
		cfg := creds.Config()
		cfg.Name = "csv-export-test"
		if err := run(runCtx, cfg); err != nil {
			t.Errorf("csv-export ended: %v", err)
		}
	}()
	t.Cleanup(func() { // before the deployment's: the worker stops first
		stopRun()
		workers.Wait()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, jg.WaitForType(ctx, sales.TypeName), "type not declared within 30s")
	return d
}

// do sends a request with the bearer token and returns the status, the
// headers and the body, redirects not followed.
func (d *deployment) do(t testing.TB, method, path, body string, header http.Header) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, d.URL()+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+d.token)
	for k, v := range header {
		req.Header[k] = v
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
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

// terminal follows the job (pkg/client's Wait) until it is terminal,
// keeping the progress seen.
func (d *deployment) terminal(t testing.TB, id string, timeout time.Duration) (api.Resource, []api.Progress) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var seen []api.Progress
	r, err := d.client.Wait(ctx, id, func(r *api.Resource) {
		if r.Progress != nil && (len(seen) == 0 || seen[len(seen)-1] != *r.Progress) {
			seen = append(seen, *r.Progress)
		}
	})
	require.NoError(t, err, "job %s not terminal within %s", id, timeout)
	return *r, seen
}

// TestExportEndToEnd submits an export of ~18 MB over HTTP, follows it and
// downloads it: the file is the export the params describe, row for row,
// with the declared content type.
func TestExportEndToEnd(t *testing.T) {
	t.Parallel()
	d := startDeployment(t)

	params := sales.Params{Region: "North", From: "2024-01-01", To: "2025-12-31", Currency: "EUR"}
	want := localExport(t, params)
	require.Greater(t, len(want.data), 15<<20, "the test is about tens of MB")

	status, body := d.submit(t, "export-north-2024-2025", params)
	require.Equal(t, http.StatusAccepted, status, "%s", body)
	var admitted api.Resource
	require.NoError(t, json.Unmarshal(body, &admitted))

	done, progress := d.terminal(t, admitted.ID, 3*time.Minute)
	require.Equal(t, api.StateSucceeded, done.State, "%+v", done.Error)
	require.Equal(t, 1, done.Attempt)
	require.Equal(t, &api.Progress{Done: int(want.rows), Total: int(want.rows), Unit: "rows"}, done.Progress)
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
	resp, err := http.Get(d.URL() + header.Get("Location"))
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
	var admitted api.Resource
	require.NoError(t, json.Unmarshal(body, &admitted))
	done, _ := d.terminal(t, admitted.ID, time.Minute)
	require.Equal(t, api.StateFailed, done.State)
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
		var admitted api.Resource
		require.NoError(b, json.Unmarshal(body, &admitted))
		done, _ := d.terminal(b, admitted.ID, 3*time.Minute)
		if done.State != api.StateSucceeded {
			b.Fatalf("job ended %s", done.State)
		}
		status, header, _ := d.do(b, http.MethodGet, "/v1/jobs/"+admitted.ID+"/result", "", nil)
		require.Equal(b, http.StatusSeeOther, status)
		resp, err := http.Get(d.URL() + header.Get("Location"))
		require.NoError(b, err)
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.NoError(b, err)
		require.Equal(b, int64(len(want.data)), n)
	}
}

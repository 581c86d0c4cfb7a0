package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/jobgate/jobgate/test/jobtest"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runServe starts `jobgate serve` in-process and waits until it answers;
// the returned stop function shuts it down and waits for it to exit.
func runServe(t *testing.T, dataDir, addr string, extra ...string) (stop func(), out *syncBuffer) {
	t.Helper()
	out = &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	m := &Main{Stdout: out, Stderr: out, Getenv: func(string) string { return "" }}
	args := append([]string{"serve", "--data-dir", dataDir, "--http-addr", addr}, extra...)
	go func() { done <- m.Run(ctx, args) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited early: %v\n%s", err, out.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "serve not ready: %s", out.String())
		time.Sleep(20 * time.Millisecond)
	}
	// The banner follows the last component's start, the gateway's, which
	// answers /readyz a moment before.
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "jobgate is serving") }, 10*time.Second, 10*time.Millisecond,
		"no banner: %s", out)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Fatal("serve did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return stop, out
}

func mintToken(t *testing.T, dataDir, tenant, subject string) string {
	t.Helper()
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	require.NoError(t, m.Run(context.Background(), []string{"token", "--data-dir", dataDir, "--tenant", tenant, "--subject", subject}))
	return strings.TrimSpace(out.String())
}

func postJob(t *testing.T, addr, token, key, body string) (int, map[string]any) {
	t.Helper()
	code, data, err := post(addr, token, key, body)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m), "%s", data)
	return code, m
}

// post submits a job (from any goroutine: it fails no test) and returns
// the status and the body.
func post(addr, token, key, body string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/jobs", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

func TestServeKeepsKeysAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	addr := jobtest.FreeAddr(t)
	stop, out := runServe(t, dir, addr)
	require.Contains(t, out.String(), dir, "the banner says where the data lives")

	tok := mintToken(t, dir, "4", "reviewer-47")
	body := `{"type":"permit_report","params":{"case_id":47,"revision":29,"pages":63}}`
	status, first := postJob(t, addr, tok, "key-s3cr3t-0815", body)
	require.Equal(t, http.StatusAccepted, status, "%v", first)
	stop()

	runServe(t, dir, addr)
	status, again := postJob(t, addr, tok, "key-s3cr3t-0815", body)
	require.Equal(t, http.StatusOK, status, "%v", again)
	require.Equal(t, first["id"], again["id"], "the same key maps to the same job after a restart")
	status, conflict := postJob(t, addr, tok, "key-s3cr3t-0815", strings.Replace(body, "29", "30", 1))
	require.Equal(t, http.StatusConflict, status, "%v", conflict)
	require.NotContains(t, out.String(), "key-s3cr3t-0815", "raw idempotency keys never reach the logs")
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}
	err := m.Run(context.Background(), []string{"frobnicate"})
	require.Error(t, err)
	require.Equal(t, 2, ExitCode(err))
	err = m.Run(context.Background(), []string{"token", "--tenant", "4"})
	require.Equal(t, 2, ExitCode(err), fmt.Sprint(err))
	err = m.Run(context.Background(), []string{"serve", "--job-ttl", "soon"})
	require.Equal(t, 2, ExitCode(err), fmt.Sprint(err))
	err = m.Run(context.Background(), []string{"serve", "-h"})
	require.Equal(t, 0, ExitCode(err), "asking for help is not a failure")
	for _, cmd := range []string{"token", "submit", "status", "watch", "jobs", "fetch"} {
		require.Equal(t, 0, ExitCode(m.Run(context.Background(), []string{cmd, "-h"})), cmd)
	}
	require.Contains(t, out.String(), "-data-dir")
}

func TestServeExportsMetricsOfEveryComponent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := jobtest.FreeAddr(t)
	runServe(t, dir, addr)
	tok := mintToken(t, dir, "4", "reviewer-47")
	status, j := postJob(t, addr, tok, "m-1", `{"type":"permit_report","params":{"case_id":1,"revision":1,"pages":2}}`)
	require.Equal(t, http.StatusAccepted, status)

	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/jobs/"+j["id"].(string), nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var got map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
		resp.Body.Close()
		if got["state"] == "succeeded" {
			break
		}
		require.True(t, time.Now().Before(deadline), "job did not succeed: %v", got)
		time.Sleep(20 * time.Millisecond)
	}
	want := []string{
		`jobgate_admissions_total{outcome="new"} 1`,
		`jobgate_render_attempts_total{outcome="succeeded"} 1`,
		`jobgate_render_duration_seconds_count{outcome="succeeded"} 1`,
		`jobgate_relay_published_total{kind="event"}`,
		`jobgate_deliveries_total{channel="webhook",outcome="delivered"} 0`,
		`jobgate_sse_connections 0`,
		`go_goroutines`,
	}
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, w := range want {
			if !strings.Contains(string(body), w) {
				t.Logf("missing %s", w)
				return false
			}
		}
		return true
	}, 20*time.Second, 100*time.Millisecond)
}

// With gateway.leave_work_to_relay the gateway only commits; the
// dispatcher's relay puts the work on the queue and the job still runs.
func TestServeWithWorkLeftToRelay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := dir + "/jobgate.yaml"
	require.NoError(t, os.WriteFile(cfg, []byte("gateway:\n  leave_work_to_relay: true\n"), 0o600))
	addr := jobtest.FreeAddr(t)
	runServe(t, dir, addr, "--config", cfg)
	tok := mintToken(t, dir, "4", "reviewer-47")
	status, j := postJob(t, addr, tok, "relay-1", `{"type":"permit_report","params":{"case_id":1,"revision":1,"pages":3}}`)
	require.Equal(t, http.StatusAccepted, status)
	require.Eventually(t, func() bool {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/jobs/"+j["id"].(string), nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var got map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&got)
		return got["state"] == "succeeded"
	}, 30*time.Second, 20*time.Millisecond)
}

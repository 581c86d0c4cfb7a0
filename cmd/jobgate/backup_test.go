package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// runCmd runs a jobgate command in-process and returns its output.
func runCmd(args ...string) (string, error) {
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}
	err := m.Run(context.Background(), args)
	return out.String(), err
}

// getJSON reads a resource with a token.
func getJSON(t *testing.T, url, token string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var m map[string]any
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	_ = json.Unmarshal(body, &m)
	if m == nil {
		m = map[string]any{}
	}
	m["_location"] = resp.Header.Get("Location")
	m["_replayed"] = resp.Header.Get("Idempotent-Replayed")
	return resp.StatusCode, m
}

// A deployment backed up while jobs are being admitted and run, then
// restored into an empty data dir: every key admitted before the backup
// began replays to its job, the jobs end (those running at the backup
// are recovered), results download, the batch and the tokens of the old
// secret are there. A corrupted backup is refused, writing nothing; so is
// a data dir that is not empty.
func TestBackupUnderLoadAndRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	dir, addr, natsAddr := t.TempDir(), jobtest.FreeAddr(t), jobtest.FreeAddr(t)
	serve := startJobgate(t, "serve", "--data-dir", dir, "--http-addr", addr, "--nats-listen", natsAddr)
	waitReady(t, addr, serve.out)
	tok := mintToken(t, dir, "4", "reviewer-47")
	body := func(i int) string {
		pages := 2
		if i < 2 {
			pages = 2000 // running while the backup is taken
		}
		return fmt.Sprintf(`{"type":"permit_report","params":{"case_id":%d,"revision":1,"pages":%d}}`, i+1, pages)
	}
	admitted := map[string]string{} // key → job id, admitted before the backup began
	for i := range 20 {
		status, j := postJob(t, addr, tok, fmt.Sprintf("before-%d", i), body(i))
		require.Equal(t, http.StatusAccepted, status)
		admitted[fmt.Sprintf("before-%d", i)] = j["id"].(string)
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/batches", strings.NewReader(`{"jobs":[`+body(100)+`,`+body(101)+`]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Idempotency-Key", "batch-1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var bres map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&bres))
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%v", bres)
	batchID := bres["id"].(string)

	// Load while the backup runs, and two long jobs running.
	waitState(t, "http://"+addr, tok, admitted["before-0"], "running", 30*time.Second)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			_, _, _ = post(addr, tok, fmt.Sprintf("during-%d", i), body(1000+i))
		}
	}()
	backupDir := filepath.Join(t.TempDir(), "backup")
	out, err := runCmd("backup", "--nats", "nats://"+natsAddr, "--data-dir", dir, "--to", backupDir)
	stop.Store(true)
	wg.Wait()
	require.NoError(t, err, out)
	require.Contains(t, out, "secret files to "+backupDir)
	// A second backup into the same directory is refused.
	_, err = runCmd("backup", "--nats", "nats://"+natsAddr, "--data-dir", dir, "--to", backupDir)
	require.ErrorContains(t, err, "not empty")
	serve.kill(t)

	// A corrupted backup: refused, nothing written.
	bad := filepath.Join(t.TempDir(), "bad")
	require.NoError(t, os.CopyFS(bad, os.DirFS(backupDir)))
	snaps, err := filepath.Glob(filepath.Join(bad, "streams", "KV_JOBGATE_JOBS.snapshot"))
	require.NoError(t, err)
	require.Len(t, snaps, 1)
	data, err := os.ReadFile(snaps[0])
	require.NoError(t, err)
	data[len(data)/2] ^= 0xff
	require.NoError(t, os.WriteFile(snaps[0], data, 0o600))
	target := filepath.Join(t.TempDir(), "restored")
	_, err = runCmd("restore", "--from", bad, "--data-dir", target)
	require.ErrorContains(t, err, "backup corrupted")
	require.ErrorContains(t, err, "KV_JOBGATE_JOBS.snapshot")
	_, err = os.Stat(target)
	require.ErrorIs(t, err, os.ErrNotExist, "a refused restore writes nothing")

	out, err = runCmd("restore", "--from", backupDir, "--data-dir", target)
	require.NoError(t, err, out)
	_, err = runCmd("restore", "--from", backupDir, "--data-dir", target)
	require.ErrorContains(t, err, "not empty")

	addr2 := jobtest.FreeAddr(t)
	restored := startJobgate(t, "serve", "--data-dir", target, "--http-addr", addr2)
	waitReady(t, addr2, restored.out)
	base := "http://" + addr2
	for key, id := range admitted {
		i := 0
		fmt.Sscanf(key, "before-%d", &i)
		status, j := postJob(t, addr2, tok, key, body(i)) // the old secret's token
		require.Equal(t, http.StatusOK, status, "%s: %v", key, j)
		require.Equal(t, id, j["id"], key)
	}
	for _, id := range admitted {
		waitState(t, base, tok, id, "succeeded", 120*time.Second)
	}
	for _, id := range admitted {
		status, j := getJSON(t, base+"/v1/jobs/"+id+"/result", tok)
		require.Equal(t, http.StatusSeeOther, status, "%v", j)
		resp, err := http.Get(base + j["_location"].(string))
		require.NoError(t, err)
		pdf, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.True(t, bytes.HasPrefix(pdf, []byte("%PDF")))
		break
	}
	status, b := getJSON(t, base+"/v1/batches/"+batchID, tok)
	require.Equal(t, http.StatusOK, status, "%v", b)
}

// waitState polls a job until it is in state.
func waitState(t *testing.T, base, token, id, state string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, j := getJSON(t, base+"/v1/jobs/"+id, token)
		if j["state"] == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not %s within %s: %d %v", id, state, timeout, code, j)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends a child process with SIGKILL and waits for it.
func (c *child) kill(t *testing.T) {
	t.Helper()
	p, err := os.FindProcess(c.pid)
	require.NoError(t, err)
	_ = p.Kill()
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the process did not end")
	}
}

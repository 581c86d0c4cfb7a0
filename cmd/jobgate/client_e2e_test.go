package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/jobgate/jobgate/test/jobtest"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/job"
	"github.com/stretchr/testify/require"
)

type syncBuffer = jobtest.SyncBuffer

// cliBundle is `jobgate serve` running in-process on a temp data dir and a
// free port, plus the environment a client command sees.
type cliBundle struct {
	dir, url, token, journal string
	env                      map[string]string
}

func setupServe(t *testing.T, extra ...string) *cliBundle {
	t.Helper()
	dir := t.TempDir()
	addr := jobtest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan error, 1)
	m := &Main{Stdout: logs, Stderr: logs, Getenv: func(string) string { return "" }}
	go func() {
		done <- m.Run(ctx, append([]string{"serve", "--data-dir", dir, "--http-addr", addr}, extra...))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
		if t.Failed() {
			t.Logf("serve output:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			t.Fatalf("serve ended: %v\n%s", err, logs.String())
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond)

	var out, errOut bytes.Buffer
	tm := &Main{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
	require.NoError(t, tm.Run(context.Background(), []string{"token", "--data-dir", dir, "--tenant", "4", "--subject", "reviewer-47"}), errOut.String())
	b := &cliBundle{dir: dir, url: base, token: strings.TrimSpace(out.String()), journal: filepath.Join(dir, "client", "journal.db")}
	b.env = map[string]string{"JOBGATE_URL": b.url, "JOBGATE_TOKEN": b.token, "JOBGATE_JOURNAL": b.journal, "HOME": dir}
	return b
}

// run executes one client command in-process and returns its stdout,
// stderr and error.
func (b *cliBundle) run(t *testing.T, ctx context.Context, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut syncBuffer
	m := &Main{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return b.env[k] }}
	err := m.Run(ctx, args)
	return out.String(), errOut.String(), err
}

// outLines splits output into lines; no output is no lines (not one empty
// line, which would let a count of one pass without any job).
func outLines(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// The CLI end to end against `serve`: submit --wait renders a real PDF with
// a progress bar and prints the id then the path; fetch downloads the same
// bytes again; status, watch and jobs show the job.
func TestCLISubmitWaitFetch(t *testing.T) {
	t.Parallel()
	b := setupServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pdf := filepath.Join(b.dir, "report.pdf")

	out, errOut, err := b.run(t, ctx, "submit", "--type", "permit_report", "--param", "case_id=47",
		"--param", "revision=29", "--param", "pages=63", "--wait", "--out", pdf)
	require.NoError(t, err, errOut)
	ls := outLines(out)
	require.Len(t, ls, 2, out)
	id := ls[0]
	require.True(t, job.ValidID(id), "first line is the job id: %q", id)
	require.Equal(t, pdf, ls[1], "last line is the result path")
	first, err := os.ReadFile(pdf)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(first, []byte("%PDF-")), "a PDF")
	require.Contains(t, errOut, "/63", "the bar counts the job's pages")
	require.Contains(t, errOut, "saved "+pdf)

	again := filepath.Join(b.dir, "again.pdf")
	out, errOut, err = b.run(t, ctx, "fetch", id, "--out", again)
	require.NoError(t, err, errOut)
	require.Equal(t, again, strings.TrimSpace(out))
	second, err := os.ReadFile(again)
	require.NoError(t, err)
	require.Equal(t, first, second)

	out, _, err = b.run(t, ctx, "status", id)
	require.NoError(t, err)
	require.Contains(t, out, "succeeded")
	require.Contains(t, out, "63/63 pages")
	out, _, err = b.run(t, ctx, "status", "--json", id)
	require.NoError(t, err)
	var res job.Resource
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, job.StateSucceeded, res.State)

	out, _, err = b.run(t, ctx, "watch", id)
	require.NoError(t, err)
	require.Contains(t, outLines(out)[len(outLines(out))-1], "succeeded")

	out, _, err = b.run(t, ctx, "jobs")
	require.NoError(t, err)
	require.Contains(t, out, id)
	require.Contains(t, outLines(out)[0], "STATE")

	// The logical request is finished: the same command is a new job.
	out, _, err = b.run(t, ctx, "submit", "--param", "case_id=47", "--param", "revision=29", "--param", "pages=63")
	require.NoError(t, err)
	require.NotEqual(t, id, strings.TrimSpace(out))
}

// Failures are one line with the problem's detail and a documented exit
// code.
func TestCLIErrors(t *testing.T) {
	t.Parallel()
	b := setupServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cases := []struct {
		name string
		args []string
		env  map[string]string
		code int
		msg  string
	}{
		{"unknown job", []string{"status", "job_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, nil, exitNotFound, "404 not-found"},
		{"invalid params", []string{"submit", "--param", "case_id=47", "--param", "revision=29", "--param", "pages=0"}, nil, exitInvalid, "/params/pages: must be at least 1"},
		{"bad token", []string{"jobs"}, map[string]string{"JOBGATE_TOKEN": "nope"}, exitUnauthorized, "401 unauthorized"},
		{"no token", []string{"jobs"}, map[string]string{"JOBGATE_TOKEN": ""}, 2, "no token"},
		{"missing id", []string{"status"}, nil, 2, "one job id"},
	}
	for _, tc := range cases {
		env := map[string]string{}
		for k, v := range b.env {
			env[k] = v
		}
		for k, v := range tc.env {
			env[k] = v
		}
		var out, errOut syncBuffer
		m := &Main{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return env[k] }}
		err := m.Run(ctx, tc.args)
		require.Error(t, err, tc.name)
		require.Equal(t, tc.code, ExitCode(err), "%s: %v", tc.name, err)
		require.Contains(t, err.Error(), tc.msg, tc.name)
		require.NotContains(t, err.Error(), "\n", "%s: one line", tc.name)
	}

	// A key reused for a different request names the job it belongs to.
	out, _, err := b.run(t, ctx, "submit", "--key", "r-63", "--param", "case_id=47", "--param", "revision=29")
	require.NoError(t, err)
	id := strings.TrimSpace(out)
	_, _, err = b.run(t, ctx, "submit", "--key", "r-63", "--param", "case_id=47", "--param", "revision=30")
	require.Equal(t, exitConflict, ExitCode(err))
	require.Contains(t, err.Error(), id)

	// Result not ready is a conflict too.
	_, _, err = b.run(t, ctx, "fetch", id, "--out", filepath.Join(b.dir, "x.pdf"))
	if err != nil { // the renderer may have been quicker
		require.Equal(t, exitConflict, ExitCode(err), err.Error())
	}

	// A canceled job: watch exits 4, fetch is a conflict.
	out, _, err = b.run(t, ctx, "submit", "--param", "case_id=47", "--param", "revision=31", "--param", "pages=2000")
	require.NoError(t, err)
	long := strings.TrimSpace(out)
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, b.url+"/v1/jobs/"+long, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "a 2000-page report is still going when canceled")
	_, _, err = b.run(t, ctx, "watch", long)
	require.Equal(t, exitCanceled, ExitCode(err), "watch of a canceled job: %v", err)
	_, _, err = b.run(t, ctx, "fetch", long, "--out", filepath.Join(b.dir, "canceled.pdf"))
	require.Equal(t, exitConflict, ExitCode(err), "fetch of a canceled job: %v", err)
}

// A job that fails makes submit --wait exit 3: here the render fails at its
// second page (a failpoint, so it fails however fast the machine renders)
// and one attempt is all a job gets.
func TestCLIFailedJobExits3(t *testing.T) {
	t.Parallel()
	b := setupServe(t, "--failpoints", "renderer.mid-render=error", "--max-attempts", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, errOut, err := b.run(t, ctx, "submit", "--param", "case_id=47", "--param", "revision=29", "--param", "pages=20", "--wait")
	require.Error(t, err, "out: %s\nerr: %s", out, errOut)
	require.Equal(t, exitFailed, ExitCode(err), "%v", err)
	id := outLines(out)[0]
	out, _, err = b.run(t, ctx, "status", "--json", id)
	require.NoError(t, err)
	var res job.Resource
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, job.StateFailed, res.State)
}

// kill -9 in the middle of `submit --wait`, after the server committed the
// job but before the answer arrived: the same command run again resumes
// the journaled key and shows the same job.
func TestCLIKilledSubmitResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	t.Parallel()
	b := setupServe(t)
	target, err := url.Parse(b.url)
	require.NoError(t, err)
	committed := make(chan string, 1)
	var hold sync.Mutex
	holding := true
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hold.Lock()
		h := holding
		hold.Unlock()
		if !h || r.Method != http.MethodPost {
			rp.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequest(r.Method, b.url+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			var res job.Resource
			_ = json.NewDecoder(resp.Body).Decode(&res)
			resp.Body.Close()
			committed <- res.ID
		}
		<-r.Context().Done() // the answer never arrives
	}))
	t.Cleanup(proxy.Close)

	args := []string{"submit", "--param", "case_id=47", "--param", "revision=29", "--param", "pages=63", "--wait", "--out", filepath.Join(b.dir, "r.pdf")}
	raw, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCLIProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "JOBGATE_CLI_HELPER_ARGS="+string(raw), "JOBGATE_URL="+proxy.URL,
		"JOBGATE_TOKEN="+b.token, "JOBGATE_JOURNAL="+b.journal, "HOME="+b.dir, "XDG_CONFIG_HOME="+b.dir)
	require.NoError(t, cmd.Start())
	var id string
	select {
	case id = <-committed:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the submission never reached the server")
	}
	require.NoError(t, cmd.Process.Kill()) // SIGKILL: no cleanup, no journal update
	err = cmd.Wait()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "killed: %v", err)

	hold.Lock()
	holding = false
	hold.Unlock()
	b.env["JOBGATE_URL"] = proxy.URL
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, errOut, err := b.run(t, ctx, args...)
	require.NoError(t, err, errOut)
	require.Equal(t, id, outLines(out)[0], "the rerun shows the same job")
	require.Contains(t, errOut, "same request as an earlier submit that was interrupted: resumed with its key, no second job")

	out, _, err = b.run(t, ctx, "jobs", "--json")
	require.NoError(t, err)
	ls := outLines(out)
	require.Len(t, ls, 1, "the server holds one job")
	var listed job.Resource
	require.NoError(t, json.Unmarshal([]byte(ls[0]), &listed))
	require.Equal(t, id, listed.ID, "and it is the resumed one")
}

// TestHelperCLIProcess runs a CLI command as a separate process for
// TestCLIKilledSubmitResumes.
func TestHelperCLIProcess(t *testing.T) {
	raw := os.Getenv("JOBGATE_CLI_HELPER_ARGS")
	if raw == "" {
		t.Skip("helper process only")
	}
	var args []string
	require.NoError(t, json.Unmarshal([]byte(raw), &args))
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	if err := m.Run(context.Background(), args); err != nil {
		os.Exit(ExitCode(err))
	}
}

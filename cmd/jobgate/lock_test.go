package main

import (
	"context"
	"fmt"
	"github.com/jobgate/jobgate/test/jobtest"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// child is a `jobgate` process started by a test.
type child struct {
	out    *syncBuffer
	exited chan struct{} // closed when the process has ended
	err    error         // its Wait error, once exited is closed
	pid    int
}

// startJobgate runs `jobgate <args>` as a child process (this test binary in
// its helper mode, see TestHelperServeProcess).
func startJobgate(t *testing.T, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServeProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "JOBGATE_SERVE_HELPER_ARGS="+strings.Join(args, " "))
	c := &child{out: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	require.NoError(t, cmd.Start())
	c.pid = cmd.Process.Pid
	go func() { c.err = cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.exited
	})
	return c
}

// exitsAtOnce waits for a child that must give up by itself, quickly and
// with a non-zero status.
func (c *child) exitsAtOnce(t *testing.T) {
	t.Helper()
	select {
	case <-c.exited:
		var ee *exec.ExitError
		require.ErrorAs(t, c.err, &ee, "must exit non-zero\n%s", c.out.String())
		require.NotZero(t, ee.ExitCode(), c.out.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("still running after 10s\n%s", c.out.String())
	}
}

// tree lists every file of dir with its size and modification time.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = fmt.Sprintf("%s %s %d", info.Mode(), info.ModTime(), info.Size())
		return nil
	}))
	return out
}

func waitReady(t *testing.T, addr string, out *syncBuffer) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, out.String())
}

func TestSecondServeOnOneDataDirExitsNamingTheLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := jobtest.FreeAddr(t)
	first := startJobgate(t, "serve", "--data-dir", dir, "--http-addr", addr)
	waitReady(t, addr, first.out)
	tok := mintToken(t, dir, "4", "reviewer-47")
	status, job1 := postJob(t, addr, tok, "one-key", `{"type":"permit_report","params":{"case_id":1,"revision":1,"pages":2}}`)
	require.Equal(t, http.StatusAccepted, status)

	addr2 := jobtest.FreeAddr(t)
	second := startJobgate(t, "serve", "--data-dir", dir, "--http-addr", addr2)
	second.exitsAtOnce(t)
	require.Contains(t, second.out.String(), filepath.Join(dir, "LOCK"), "the error names the lock")
	_, err := http.Get("http://" + addr2 + "/readyz")
	require.Error(t, err, "the second process never served")

	// The first one is unharmed and still owns the key.
	status, again := postJob(t, addr, tok, "one-key", `{"type":"permit_report","params":{"case_id":1,"revision":1,"pages":2}}`)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, job1["id"], again["id"])
	select {
	case <-first.exited:
		t.Fatalf("first server exited: %v\n%s", first.err, first.out.String())
	default:
	}
}

// A component on the embedded server takes the same lock, and a refused
// process leaves the data dir exactly as it found it.
func TestLockedDataDirIsLeftUntouched(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lock := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB))
	before := tree(t, dir)

	for _, cmd := range []string{"serve", "gateway", "dispatcher"} {
		c := startJobgate(t, cmd, "--data-dir", dir, "--http-addr", jobtest.FreeAddr(t))
		c.exitsAtOnce(t)
		require.Contains(t, c.out.String(), lock, cmd)
		require.Equal(t, before, tree(t, dir), "%s changed the data dir", cmd)
	}
}

func TestTakenPortsAreNamedAtOnce(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { taken.Close() }) // after the parallel subtests
	addr := taken.Addr().String()

	t.Run("http", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		c := startJobgate(t, "serve", "--data-dir", dir, "--http-addr", addr)
		c.exitsAtOnce(t)
		require.Contains(t, c.out.String(), addr)
		_, err := os.Stat(filepath.Join(dir, "nats"))
		require.ErrorIs(t, err, os.ErrNotExist, "nothing is provisioned behind a port that is not ours")
	})
	t.Run("nats-listen", func(t *testing.T) {
		t.Parallel()
		c := startJobgate(t, "serve", "--data-dir", t.TempDir(), "--http-addr", jobtest.FreeAddr(t), "--nats-listen", addr)
		c.exitsAtOnce(t)
		require.Contains(t, c.out.String(), addr)
	})
}

func TestServeRefusesDevModeOnNonLoopbackAddress(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out syncBuffer
	m := &Main{Stdout: &out, Stderr: &out, Getenv: func(k string) string {
		if k == "JOBGATE_DEV" {
			return "true"
		}
		return ""
	}}
	err := m.Run(context.Background(), []string{"serve", "--data-dir", dir, "--http-addr", "0.0.0.0:0"})
	require.Error(t, err)
	require.NotZero(t, ExitCode(err))
	require.ErrorContains(t, err, "0.0.0.0:0")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "refused before anything was created")
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"golang.org/x/sys/unix"
)

// The image runs: its root file system unpacked, its entrypoint and
// default command started chrooted into it as its user, with its
// environment and working directory and nothing else (in a network
// namespace of its own, so its default address 0.0.0.0:8080 is free
// whatever runs on this machine), answers /readyz, keeps its data in
// the volume as that user, and stops cleanly on SIGTERM.
func TestImageRunsAsItsUserAndAnswersReadyz(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root; this test needs root to chroot and to run as the image's user")
		}
		t.Skip("needs root (chroot, setuid to the image's user, a network namespace): run as root, as CI does")
	}
	img, _ := readLayout(t, testImage)
	root := t.TempDir()
	rc := mutate.Extract(img)
	if err := untar(rc, root); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	// t.TempDir is 0700 root's: the image's user must reach its root.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	var u, g uint32
	if _, err := fmt.Sscanf(c.User, "%d:%d", &u, &g); err != nil {
		t.Fatalf("user %q: %v", c.User, err)
	}

	var logs bytes.Buffer
	var mu sync.Mutex
	cmd := exec.Command(c.Entrypoint[0], append(c.Entrypoint[1:], c.Cmd...)...)
	cmd.Env = c.Env
	cmd.Dir = c.WorkingDir
	cmd.Stdout = lockedWriter{&mu, &logs}
	cmd.Stderr = lockedWriter{&mu, &logs}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     root,
		Credential: &syscall.Credential{Uid: u, Gid: g, Groups: []uint32{}},
		Cloneflags: syscall.CLONE_NEWNET,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			mu.Lock()
			t.Logf("jobgate's output:\n%s", logs.String())
			mu.Unlock()
		}
	}()

	// Its process runs as the image's user, not root.
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if uidLine := field(status, "Uid:"); !strings.HasPrefix(uidLine, fmt.Sprintf("%d\t%d\t", u, u)) {
		t.Fatalf("the process runs as uid %q, want %d", uidLine, u)
	}

	ns := enterNetns(t, cmd.Process.Pid)
	defer ns.close()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: ns.dial}}
	addr := strings.TrimPrefix(envOf(c.Env, "JOBGATE_HTTP_ADDR"), "0.0.0.0")
	if addr != ":8080" {
		t.Fatalf("the image's JOBGATE_HTTP_ADDR %q is not 0.0.0.0:8080", envOf(c.Env, "JOBGATE_HTTP_ADDR"))
	}
	start := time.Now()
	deadline := start.Add(60 * time.Second)
	for {
		resp, err := client.Get("http://127.0.0.1" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("jobgate exited before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not 200 within 60 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("ready %s after the start", time.Since(start).Round(time.Millisecond))

	// The image's health check runs in the container as it would under
	// Docker: its command found on the image's PATH, as the image's user.
	hc := c.Healthcheck
	if hc == nil || len(hc.Test) < 2 || hc.Test[0] != "CMD" {
		t.Fatalf("health check %+v: want CMD and a command", hc)
	}
	exe := ""
	for _, dir := range strings.Split(envOf(c.Env, "PATH"), ":") {
		if fi, err := os.Stat(filepath.Join(root, dir, hc.Test[1])); err == nil && fi.Mode()&0o111 != 0 {
			exe = filepath.Join(dir, hc.Test[1])
			break
		}
	}
	if exe == "" {
		t.Fatalf("the health check's %q is not on the image's PATH %q", hc.Test[1], envOf(c.Env, "PATH"))
	}
	var probeOut bytes.Buffer
	probe := exec.Command(exe, hc.Test[2:]...)
	probe.Env, probe.Dir, probe.Stdout, probe.Stderr = c.Env, c.WorkingDir, &probeOut, &probeOut
	probe.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: u, Gid: g, Groups: []uint32{}}}
	if err := ns.run(probe); err != nil {
		t.Fatalf("the health check %v failed: %v\n%s", hc.Test, err, probeOut.String())
	}

	// Its state is in the volume, the user's.
	secret := filepath.Join(root, c.WorkingDir, "auth.secret")
	fi, err := os.Stat(secret)
	if err != nil {
		t.Fatalf("no secret in the data volume: %v", err)
	}
	if got := ownerOf(t, fi); got != fmt.Sprintf("%d:%d", u, g) {
		t.Fatalf("%s is owned by %s, want the image's user", secret, got)
	}

	// docker stop: SIGTERM, then it drains and exits 0.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("jobgate did not stop cleanly on SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("jobgate still runs 30 s after SIGTERM")
	}
}

// lockedWriter lets the process's two streams share one buffer.
type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// field is the value of a "Name:\tvalue" line of a /proc status file.
func field(status []byte, name string) string {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func envOf(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// netns dials from inside another process's network namespace: one
// goroutine, locked to its OS thread, joins the namespace and makes every
// connection there (a socket belongs to the namespace it was made in, so
// the rest of the program uses it as any other). The thread is never
// returned to the runtime: Go ends a thread whose goroutine exits locked.
type netns struct {
	reqs chan dialReq
}

type dialReq struct {
	addr string
	cmd  *exec.Cmd // run instead of dialing: started from the namespace
	resp chan dialResp
}

type dialResp struct {
	c   net.Conn
	err error
}

func enterNetns(t *testing.T, pid int) *netns {
	t.Helper()
	ns := &netns{reqs: make(chan dialReq)}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ready <- fmt.Errorf("open netns: %w", err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			ready <- fmt.Errorf("setns: %w", err)
			return
		}
		// A new namespace's loopback is down, as a container runtime
		// would not leave it.
		if err := linkUp("lo"); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for r := range ns.reqs {
			if r.cmd != nil {
				// A child is forked from this thread, so it starts in
				// the namespace too.
				r.resp <- dialResp{err: r.cmd.Run()}
				continue
			}
			var d net.Dialer
			c, err := d.Dial("tcp", r.addr)
			r.resp <- dialResp{c, err}
		}
	}()
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	return ns
}

func (ns *netns) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	r := dialReq{addr: addr, resp: make(chan dialResp, 1)}
	select {
	case ns.reqs <- r:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	resp := <-r.resp
	return resp.c, resp.err
}

// run runs cmd to its end inside the namespace.
func (ns *netns) run(cmd *exec.Cmd) error {
	r := dialReq{cmd: cmd, resp: make(chan dialResp, 1)}
	ns.reqs <- r
	return (<-r.resp).err
}

func (ns *netns) close() { close(ns.reqs) }

// linkUp sets an interface up in the calling thread's namespace.
func linkUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return fmt.Errorf("ifreq %s: %w", name, err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("flags of %s: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("%s up: %w", name, err)
	}
	return nil
}

package bench

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// redisProc is a redis-server the bench started for the Asynq comparison:
// on a free loopback port, append-only with an fsync per write
// (appendfsync always, what Asynq's durability claims need), no RDB
// snapshots, its files in the bench's work dir.
type redisProc struct {
	cmd  *exec.Cmd
	addr string
	pid  int
	done chan struct{}
}

// startRedis starts Debian's redis-server (apt-get install redis-server);
// an error says why there is none.
func startRedis(workDir string) (*redisProc, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("no redis-server on PATH (apt-get install redis-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := filepath.Join(workDir, "redis")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no", "--loglevel", "warning")
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	rp := &redisProc{cmd: cmd, addr: "127.0.0.1:" + strconv.Itoa(port), pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(rp.done) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", rp.addr, time.Second)
		if err == nil {
			c.Close()
			return rp, nil
		}
		select {
		case <-rp.done:
			return nil, errors.New("redis-server exited at start")
		default:
		}
		if time.Now().After(deadline) {
			rp.stop()
			return nil, fmt.Errorf("redis-server not accepting on %s within 10s", rp.addr)
		}
	}
}

// stop ends redis-server (SIGTERM, then a kill after 10 s).
func (rp *redisProc) stop() {
	_ = rp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-rp.done:
	case <-time.After(10 * time.Second):
		_ = rp.cmd.Process.Kill()
		<-rp.done
	}
}

package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"
)

// TargetSpec says which system the bench starts in its target process.
type TargetSpec struct {
	// DataDir is the target's fresh data directory.
	DataDir string
	// Components to run: "gateway" alone, or the whole of `serve`
	// ("dispatcher", "renderer", "notifier", "gateway").
	Components []string
	// SyncAlways makes the embedded server fsync every write.
	SyncAlways bool
	// RendererConcurrency is the renderer's number of render slots (0 =
	// the default).
	RendererConcurrency int
	// AuthSecret is the bearer token secret the bench mints tokens with.
	AuthSecret string
	// Env are extra environment variables (NAME=value) for the target.
	Env []string
}

// Launcher builds the command that runs the target process for spec; the
// command's standard input and output carry the control protocol.
type Launcher func(spec TargetSpec) *exec.Cmd

// proc is a running target process.
type proc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	ready Ready
	mu    sync.Mutex
	spec  TargetSpec
}

func startTarget(launch Launcher, spec TargetSpec) (*proc, error) {
	cmd := launch(spec)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start target: %w", err)
	}
	p := &proc{cmd: cmd, in: in, out: bufio.NewScanner(outPipe), spec: spec}
	p.out.Buffer(make([]byte, 0, 1<<16), 16<<20)
	ready := make(chan error, 1)
	go func() {
		if !p.out.Scan() {
			ready <- fmt.Errorf("target exited before it was ready: %v", p.out.Err())
			return
		}
		ready <- json.Unmarshal(p.out.Bytes(), &p.ready)
	}()
	select {
	case err = <-ready:
	case <-time.After(90 * time.Second):
		err = errors.New("target not ready within 90s")
	}
	if err != nil {
		p.kill()
		return nil, err
	}
	return p, nil
}

// call sends one request and waits for its response.
func (p *proc) call(req Request) (Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	data, err := json.Marshal(req)
	if err != nil {
		return Response{}, err
	}
	if _, err := p.in.Write(append(data, '\n')); err != nil {
		return Response{}, fmt.Errorf("target %s: %w", req.Op, err)
	}
	if !p.out.Scan() {
		return Response{}, fmt.Errorf("target %s: no response: %v", req.Op, p.out.Err())
	}
	var resp Response
	if err := json.Unmarshal(p.out.Bytes(), &resp); err != nil {
		return Response{}, err
	}
	if resp.Err != "" {
		return resp, fmt.Errorf("target %s: %s", req.Op, resp.Err)
	}
	return resp, nil
}

func (p *proc) mem() (*MemInfo, error) {
	resp, err := p.call(Request{Op: opMem})
	return resp.Mem, err
}

func (p *proc) rss() int64 {
	n, _ := procRSS(p.ready.PID)
	return n
}

// stop ends the target gracefully (closing its input makes it shut its
// services down) and kills it if it does not exit in time.
func (p *proc) stop() {
	_ = p.in.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

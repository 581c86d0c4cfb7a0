package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// NATSModule is the nats-server main package, built from the version go.mod
// pins (the module cache or the Go proxy; no other download).
const NATSModule = "github.com/nats-io/nats-server/v2"

// Binaries are the executables a run starts.
type Binaries struct {
	Jobgate    string
	NATSServer string
}

// BuildBinaries builds bin/jobgate and nats-server from the module at root
// into dir. race builds jobgate with the race detector.
func BuildBinaries(ctx context.Context, root, dir string, race bool) (Binaries, error) {
	b := Binaries{Jobgate: filepath.Join(dir, "jobgate"), NATSServer: filepath.Join(dir, "nats-server")}
	goBin := goCommand()
	args := []string{"build", "-o", b.Jobgate}
	if race {
		args = append(args, "-race")
	}
	for _, c := range [][]string{append(args, "./cmd/jobgate"), {"build", "-o", b.NATSServer, NATSModule}} {
		cmd := exec.CommandContext(ctx, goBin, c...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go %s: %w\n%s", strings.Join(c, " "), err, out)
		}
	}
	return b, nil
}

func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go" // go test puts GOROOT/bin on PATH; outside it, the error names the command
}

// ModuleRoot walks up from dir to the directory holding go.mod.
func ModuleRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
	}
}

// freePorts reserves n distinct loopback ports and releases them for the
// processes to bind. They are taken below the kernel's ephemeral range:
// a killed gateway or NATS node binds its port again on restart, and the
// clients' thousands of outgoing connections draw their local ports from
// that range, so one could otherwise take it meanwhile.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	low := ephemeralLow()
	ports := make([]int, 0, n)
	start := 10000 + int(time.Now().UnixNano()%int64(low-11000))
	for p := start; len(ports) < n && p < start+4000 && p < low; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, p)
	}
	for len(ports) < n { // no room below the range: any free port
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ephemeralLow is the start of the kernel's ephemeral port range (Linux;
// 32768 elsewhere or when the range leaves no room below it).
func ephemeralLow() int {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 11000 {
				return v
			}
		}
	}
	return 32768
}

// Kinds of process.
const (
	KindNATS       = "nats"
	KindGateway    = "gateway"
	KindRenderer   = "renderer"
	KindDispatcher = "dispatcher"
	KindNotifier   = "notifier"
)

// proc is one OS process the harness starts, kills, pauses and restarts.
type proc struct {
	name   string
	kind   string
	argv   []string
	env    []string
	dir    string
	log    string
	health string // URL answering 200 when ready; empty: none
	node   int    // a NATS node's index
	store  string // a NATS node's store dir

	// onExit is told of an exit nobody asked for.
	onExit func(p *proc, err error)

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	expected bool // the harness killed or stopped it
	stopped  bool // SIGSTOPped
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("%s already running", p.name)
	}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== chaos: start %s at %s\n", p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a Ctrl-C at the terminal reaches the harness
	// only, which stops everything in order. Pdeathsig kills the child
	// should the harness die without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.expected, p.stopped = cmd, done, false, false
	go func() {
		err := cmd.Wait()
		_ = logf.Close()
		p.mu.Lock()
		expected := p.expected
		if p.cmd == cmd {
			p.cmd = nil
		}
		p.mu.Unlock()
		close(done)
		if !expected && p.onExit != nil {
			p.onExit(p, err)
		}
	}()
	return nil
}

// running reports whether the process is alive (stopped or not).
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// signal sends sig to the process (by its pid only).
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s not running", p.name)
	}
	switch sig {
	case syscall.SIGKILL, syscall.SIGTERM:
		p.expected = true
	case syscall.SIGSTOP:
		p.stopped = true
	case syscall.SIGCONT:
		p.stopped = false
	}
	return p.cmd.Process.Signal(sig)
}

// kill SIGKILLs the process and waits for it to be gone.
func (p *proc) kill() error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-done
	return nil
}

// terminate asks the process to stop (SIGCONT first, since a stopped
// process does not act on SIGTERM), and kills it after grace.
func (p *proc) terminate(grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = p.signal(syscall.SIGCONT)
	_ = p.signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = p.signal(syscall.SIGKILL)
		<-done
	}
}

// waitHealthy polls the process's health URL until it answers 200.
func (p *proc) waitHealthy(ctx context.Context, timeout time.Duration) error {
	if p.health == "" {
		return nil
	}
	return waitHTTP(ctx, p.health, timeout, p.running)
}

var errGone = errors.New("process exited")

// waitHTTP polls url until it answers 200 or timeout; alive, if given,
// ends the wait early when it turns false.
func waitHTTP(ctx context.Context, url string, timeout time.Duration, alive func() bool) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if alive != nil && !alive() {
			return fmt.Errorf("%s: %w", url, errGone)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not ready within %s: %s", url, timeout, last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// natsConfig is one node's nats-server configuration: it listens on host
// (loopback, or its namespace's address in a partition run) and routes to
// routes (host:port of every node).
func natsConfig(name, host string, client, route, monitor int, routes []string, store string, syncAlways bool) string {
	var rs []string
	for _, r := range routes {
		rs = append(rs, "    nats-route://"+r)
	}
	sync := ""
	if syncAlways {
		sync = "  sync_interval: \"always\"\n"
	}
	return fmt.Sprintf(`# written by the chaos harness
server_name: %s
listen: %s:%d
http: %s:%d
max_payload: 8MB
jetstream {
  store_dir: %q
  max_memory_store: 256MB
  max_file_store: 24GB
%s}
cluster {
  name: jobgate-chaos
  listen: %s:%d
  routes: [
%s
  ]
}
`, name, host, client, host, monitor, store, sync, host, route, strings.Join(rs, "\n"))
}

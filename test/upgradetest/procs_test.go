package upgradetest

import (
	"bytes"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jobgate/jobgate/test/jobtest"
)

// proc is a jobgate process of the test, its output kept for a failure.
type proc struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
	err    error
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// start runs bin with args and extra environment; the process is killed
// at the test's end if it still runs, and its output logged on a failure.
func start(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = jobtest.ChildEnv(env...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, p.output())
		}
	})
	return p
}

// stop sends SIGTERM, as systemd, Docker and Kubernetes do, and waits for
// a clean exit within jobgate's 25 s stop and some slack.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	select {
	case <-p.exited:
		if p.err != nil {
			t.Fatalf("%s did not stop cleanly: %v\n%s", p.name, p.err, p.output())
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("%s still runs 40 s after SIGTERM", p.name)
	}
}

// binaries are the two jobgates, or the test skips.
func binaries(t *testing.T) (oldBin, newBin string) {
	t.Helper()
	oldBin, newBin = os.Getenv("JOBGATE_UPGRADE_OLD"), os.Getenv("JOBGATE_UPGRADE_NEW")
	if oldBin == "" || newBin == "" {
		t.Skip("the upgrade test needs JOBGATE_UPGRADE_OLD and JOBGATE_UPGRADE_NEW: run make upgrade-test")
	}
	return oldBin, newBin
}

package conformance

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jobgate/jobgate/internal/childproc"
	"github.com/stretchr/testify/require"
)

// spec is the job types every conformance worker runs (CONF_SPEC): one
// params schema, and per kind its limits.
//
//go:embed testdata/types.json
var spec []byte

// NewSuite starts a deployment (`<jobgate> serve` on free loopback ports,
// in a temp dir, with a 4 MiB result quota per tenant) and writes the
// spec beside it.
func NewSuite(t T, jobgate string) *Suite {
	t.Helper()
	dir := t.TempDir()
	s := &Suite{gates: filepath.Join(dir, "gates"), spec: filepath.Join(dir, "types.json")}
	require.NoError(t, os.MkdirAll(s.gates, 0o755))
	require.NoError(t, os.WriteFile(s.spec, spec, 0o644))
	s.d = startDeployment(t, jobgate)
	return s
}

// WorkerEnv is the environment of a conformance worker process
// (docs/conformance.md): the deployment's NATS URL and the credential, the
// spec, the kinds to run, the name prefix, the gates and the timings.
func (s *Suite) WorkerEnv(name, prefix string, cred Credential, kinds []string) []string {
	return s.workerEnv(s.d.natsURL, name, prefix, cred, kinds)
}

// workerEnv is WorkerEnv with the NATS URL the worker connects to (the
// lease scenario's partition).
func (s *Suite) workerEnv(natsURL, name, prefix string, cred Credential, kinds []string) []string {
	return childproc.Env("JOBGATE_NATS_URL="+natsURL, "JOBGATE_WORKER_USER="+cred.User, "JOBGATE_WORKER_PASSWORD="+cred.Password,
		"CONF_SPEC="+s.spec, "CONF_KINDS="+strings.Join(kinds, ","), "CONF_PREFIX="+prefix, "CONF_LABEL="+prefix, "CONF_GATES="+s.gates,
		"CONF_NAME="+name, "CONF_HEARTBEAT_MS=500", "CONF_DRAIN_MS=1000")
}

// CommandImpl is an implementation whose worker processes are a shell
// command (`sh -c "exec <command>"` in dir).
func (s *Suite) CommandImpl(name, dir, command string) *Impl {
	startVia := func(t T, natsURL, pname string, cred Credential, kinds ...string) *proc {
		return start(t, pname, dir, s.workerEnv(natsURL, pname, name, cred, kinds), "/bin/sh", "-c", "exec "+command)
	}
	return &Impl{Name: name, startVia: startVia, Start: func(t T, pname string, cred Credential, kinds ...string) *proc {
		return startVia(t, s.d.natsURL, pname, cred, kinds...)
	}}
}

// StartMain starts an implementation's main worker process, on a
// credential of its own for its main kinds, and waits until it is ready.
func (s *Suite) StartMain(t T, im *Impl) {
	t.Helper()
	types := make([]string, len(mainKinds))
	for i, k := range mainKinds {
		types[i] = im.Name + "_" + k
	}
	im.worker = im.Start(t, im.Name+"-main", s.d.workerCredential(t, types...), mainKinds...)
	im.worker.wait(t, 30*time.Second, "ready", eventOf("ready", ""))
}

// Config is what Run needs.
type Config struct {
	// Jobgate is the jobgate binary the deployment runs.
	Jobgate string
	// WorkerCmd starts a worker process of the implementation under test
	// (docs/conformance.md says what it must do); Dir is where it runs.
	WorkerCmd, Dir string
	// Name prefixes the implementation's types; "w" if empty.
	Name string
	// Only runs the scenarios of these names (all if empty).
	Only []string
	// Out receives one line per scenario and, last, "N passed, M failed".
	Out io.Writer
}

var implName = regexp.MustCompile(`^[a-z][a-z0-9]{0,15}$`)

// Run drives a worker implementation through the scenarios against a
// deployment of its own and reports each; failed counts the scenarios
// that failed, err says why none could run.
func Run(ctx context.Context, cfg Config) (passed, failed int, err error) {
	if cfg.Name == "" {
		cfg.Name = "w"
	}
	if !implName.MatchString(cfg.Name) {
		return 0, 0, fmt.Errorf("conformance: name %q must match %s", cfg.Name, implName)
	}
	if strings.TrimSpace(cfg.WorkerCmd) == "" {
		return 0, 0, fmt.Errorf("conformance: no worker command")
	}
	var scenarios []Scenario
	for _, sc := range Scenarios {
		if len(cfg.Only) == 0 || slices.Contains(cfg.Only, sc.Name) {
			scenarios = append(scenarios, sc)
		}
	}
	if len(scenarios) == 0 {
		return 0, 0, fmt.Errorf("conformance: no scenario named %v", cfg.Only)
	}
	began := time.Now()
	var suite *Suite
	var im *Impl
	setup := runUntilDone(func(t T) {
		suite = NewSuite(t, cfg.Jobgate)
		im = suite.CommandImpl(cfg.Name, cfg.Dir, cfg.WorkerCmd)
		suite.StartMain(t, im)
	})
	defer setup.finish()
	if setup.Failed() {
		return 0, 0, fmt.Errorf("conformance: setting up: %s", strings.Join(append(setup.errors, setup.logs...), "\n"))
	}
	fmt.Fprintf(cfg.Out, "deployment and %s's worker ready after %s\n", cfg.Name, time.Since(began).Round(time.Millisecond))
	names := make([]string, len(scenarios))
	for i, sc := range scenarios {
		names[i] = sc.Name
	}
	return report(ctx, cfg.Out, names, func(i int, t T) { scenarios[i].Run(t, suite, im) })
}

// report runs the named scenarios side by side, then prints a line each
// (ok or FAIL, with what failed and what it logged) and "N passed, M
// failed".
func report(ctx context.Context, out io.Writer, names []string, run func(i int, t T)) (passed, failed int, err error) {
	results, err := runAll(ctx, len(names), run)
	if err != nil {
		return 0, 0, err
	}
	for i, name := range names {
		r := results[i]
		if !r.t.Failed() {
			passed++
			fmt.Fprintf(out, "ok    %-17s %s\n", name, r.took.Round(time.Millisecond))
			continue
		}
		failed++
		fmt.Fprintf(out, "FAIL  %-17s %s\n", name, r.took.Round(time.Millisecond))
		for _, line := range append(r.t.errors, r.t.logs...) {
			for _, l := range strings.Split(line, "\n") {
				fmt.Fprintf(out, "      %s\n", l)
			}
		}
	}
	fmt.Fprintf(out, "%d passed, %d failed\n", passed, failed)
	return passed, failed, nil
}

// outcome is how a scenario run by runAll went.
type outcome struct {
	t    *scenarioT
	took time.Duration
}

// runAll runs n scenarios side by side, all at once (they mostly wait on
// processes, so go test's -parallel bound, the number of CPUs, would
// only queue them), each as runScenario does.
func runAll(ctx context.Context, n int, run func(i int, t T)) ([]outcome, error) {
	results := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			results[i] = outcome{runScenario(func(t T) { run(i, t) }), time.Since(start)}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return results, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runUntilDone runs f as runScenario does, but leaves its cleanups to the
// caller: what it set up outlives it.
func runUntilDone(f func(T)) *scenarioT {
	s := &scenarioT{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				s.Errorf("panic: %v", r)
			}
		}()
		f(s)
	}()
	<-done
	return s
}

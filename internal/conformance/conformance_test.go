package conformance

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// binaries builds jobgate and the Go conformance worker once for the
// package's tests.
var binaries = sync.OnceValues(func() ([2]string, error) {
	bin, gobin := filepath.Join(binDir, "jobgate"), filepath.Join(binDir, "goworker")
	root, err := filepath.Abs(filepath.Join("..", "..")) // the package's directory is internal/conformance
	if err != nil {
		return [2]string{}, err
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs[0] = jobtest.GoBuild(root, bin, "./cmd/jobgate") }()
	go func() { defer wg.Done(); errs[1] = jobtest.GoBuild(root, gobin, "./test/conformance/goworker") }()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return [2]string{}, err
		}
	}
	return [2]string{bin, gobin}, nil
})

// TestConformance drives the Go worker (pkg/worker) and the TypeScript
// worker (sdk/typescript) through every scenario of the runner against one
// real `jobgate serve`, each on its own types and credential, side by
// side; last, jobs crashed and given back by TypeScript processes are
// finished by a Go one.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and spawns jobgate and worker processes")
	}
	began := time.Now()
	root := jobtest.RepoRoot(t)
	tsDir, tsSkip := typescript(t, root)
	var tsErr error
	var wg sync.WaitGroup
	if tsSkip == "" {
		wg.Add(1)
		go func() { defer wg.Done(); tsErr = buildTypeScript(tsDir) }()
	}
	bins, err := binaries()
	require.NoError(t, err)
	wg.Wait()
	require.NoError(t, tsErr)
	t.Logf("built jobgate, goworker and (unless skipped: %q) the TypeScript worker in %s", tsSkip, time.Since(began).Round(time.Millisecond))

	s := NewSuite(t, bins[0])
	goImpl := s.CommandImpl("go", filepath.Dir(bins[1]), bins[1])
	tsImpl := s.CommandImpl("ts", tsDir, "node "+filepath.Join("dist", "test", "conformance-worker.js"))
	s.StartMain(t, goImpl)
	if tsSkip == "" {
		s.StartMain(t, tsImpl)
	}
	t.Logf("deployment and workers ready after %s", time.Since(began).Round(time.Millisecond))

	t.Run("scenarios", func(t *testing.T) {
		for _, im := range []*Impl{goImpl, tsImpl} {
			for _, sc := range Scenarios {
				t.Run(im.Name+"/"+sc.Name, func(t *testing.T) {
					if tsSkip != "" && im == tsImpl {
						t.Skip("JOBGATE_SKIP_INTEROP=1 and " + tsSkip)
					}
					t.Parallel()
					sc.Run(t, s, im)
				})
			}
		}
		t.Run("side_by_side", func(t *testing.T) {
			if tsSkip != "" {
				t.Skip("JOBGATE_SKIP_INTEROP=1 and " + tsSkip)
			}
			t.Parallel()
			scenarioSideBySide(t, s)
		})
		t.Run("ts_crash_and_drain_taken_over_by_go", func(t *testing.T) {
			if tsSkip != "" {
				t.Skip("JOBGATE_SKIP_INTEROP=1 and " + tsSkip)
			}
			t.Parallel()
			handover(t, s, tsImpl, goImpl, "handover", "drain")
		})
	})
	t.Logf("whole suite: %s", time.Since(began).Round(time.Millisecond))
}

// The runner fails a worker that skips a duty, naming the scenario: one
// whose handler never sees a cancel, one that gives nothing back on
// SIGTERM. (CONF_BREAK, goworker's own switch.)
func TestRunnerFailsAWorkerThatSkipsADuty(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and spawns jobgate and worker processes")
	}
	t.Parallel()
	bins, err := binaries()
	require.NoError(t, err)
	for duty, scenario := range map[string]string{"cancel": "cancel", "drain": "handover"} {
		t.Run(duty, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			passed, failed, err := Run(context.Background(), Config{Jobgate: bins[0], WorkerCmd: "env CONF_BREAK=" + duty + " " + bins[1],
				Dir: t.TempDir(), Name: "broken" + duty, Only: []string{"declare", scenario}, Out: &out})
			require.NoError(t, err, out.String())
			require.Equal(t, 1, passed, out.String())
			require.Equal(t, 1, failed, out.String())
			require.Contains(t, out.String(), "FAIL  "+scenario)
			require.Contains(t, out.String(), "\n1 passed, 1 failed\n")
		})
	}
}

// `jobgate conformance` is the runner on the command line: one line per
// scenario, "N passed, M failed" last, exit 0 when all passed.
func TestConformanceCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and spawns jobgate and worker processes")
	}
	t.Parallel()
	bins, err := binaries()
	require.NoError(t, err)
	cmd := exec.Command(bins[0], "conformance", "--worker-cmd", bins[1], "--name", "cli", "--only", "declare,result,permanent")
	cmd.Dir = t.TempDir()
	cmd.Env = jobtest.ChildEnv()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Equal(t, "3 passed, 0 failed", lines[len(lines)-1], "%s", out)
	for _, sc := range []string{"declare", "result", "permanent"} {
		require.Contains(t, string(out), "ok    "+sc)
	}
}

// Both implementations' types in one deployment: declared with identical
// limits and schema from the same spec, each announced by its live worker,
// and jobs of both running at the same time.
func scenarioSideBySide(t *testing.T, s *Suite) {
	c := s.d.client(t, "side", "requester")
	r := c.do(t, http.MethodGet, "/v1/types?limit=200", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	for _, name := range []string{"go_work", "ts_work", "go_timeout", "ts_timeout", "permit_report"} {
		require.Contains(t, string(r.body), `"name":"`+name+`"`)
	}
	goT, ok := c.typeInfo(t, "go_work")
	require.True(t, ok)
	tsT, ok := c.typeInfo(t, "ts_work")
	require.True(t, ok)
	require.JSONEq(t, string(goT.Schema), string(tsT.Schema))
	require.Equal(t, goT.TimeoutSeconds, tsT.TimeoutSeconds)
	require.Equal(t, goT.Attempts, tsT.Attempts)
	require.Equal(t, goT.MaxResultBytes, tsT.MaxResultBytes)
	require.Equal(t, goT.ContentType, tsT.ContentType)
	c.untilWorkers(t, "ts_work", 10*time.Second, func(n int) bool { return n == 1 })
	c.untilWorkers(t, "go_work", 10*time.Second, func(n int) bool { return n == 1 })

	gj := c.submit(t, "go_work", map[string]any{"mode": "hold", "gate": "side-go"})
	tj := c.submit(t, "ts_work", map[string]any{"mode": "hold", "gate": "side-ts"})
	for _, id := range []string{gj.ID, tj.ID} {
		c.until(t, id, 20*time.Second, "running", func(j jobView) bool { return j.State == "running" && j.Progress != nil })
	}
	// Both running at once, then both done.
	s.open(t, "side-go")
	s.open(t, "side-ts")
	for id, by := range map[string]string{gj.ID: "go", tj.ID: "ts"} {
		j := c.terminal(t, id, 20*time.Second)
		require.Equal(t, "succeeded", j.State)
		require.Equal(t, "done by "+by+" at attempt 1\n", string(c.download(t, id).body))
	}
}

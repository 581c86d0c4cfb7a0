package conformance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/test/jobtest"
	"github.com/stretchr/testify/require"
)

// TestEndpointConformance runs the endpoint scenarios with the Python and
// the Node handlers (handlers/, each on its language's standard library)
// against one real `jobgate serve`, side by side; dispatcher_killed runs
// each against a gateway and three `jobgate dispatcher` processes of its
// own.
func TestEndpointConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and spawns jobgate and handler processes")
	}
	t.Parallel()
	began := time.Now()
	root := jobtest.RepoRoot(t)
	dir := filepath.Join(root, "internal", "conformance", "handlers")
	impls := map[string]*EndpointImpl{}
	if py, missing := python(root); missing == "" {
		impls["py"] = &EndpointImpl{Name: "py", Command: py + " handler.py", Dir: dir}
	} else if skip := jobtest.InteropMissing(t, missing, "the Python endpoint handler", dir); skip != "" {
		t.Log(skip)
	}
	if missing := jobtest.NodeMissing(dir, nil); missing == "" {
		impls["node"] = &EndpointImpl{Name: "node", Command: "node handler.js", Dir: dir}
	} else if skip := jobtest.InteropMissing(t, missing, "the Node endpoint handler", dir); skip != "" {
		t.Log(skip)
	}
	if len(impls) == 0 {
		t.Skip("neither python3 nor node")
	}
	bins, err := binaries()
	require.NoError(t, err)
	s := NewEndpointSuite(t, bins[0])
	for _, im := range impls {
		s.StartHandler(t, im)
	}
	t.Logf("deployment and handlers ready after %s", time.Since(began).Round(time.Millisecond))
	// Every scenario of both at once, then one subtest each saying how it
	// went: t.Parallel would run two at a time on a 2-CPU machine, and
	// they mostly wait.
	type run struct {
		name string
		sc   EndpointScenario
		im   *EndpointImpl
	}
	var runs []run
	for _, name := range []string{"py", "node"} {
		for _, sc := range EndpointScenarios {
			runs = append(runs, run{name, sc, impls[name]})
		}
	}
	results, err := runAll(context.Background(), len(runs), func(i int, st T) {
		if runs[i].im != nil {
			runs[i].sc.Run(st, s, runs[i].im)
		}
	})
	require.NoError(t, err)
	t.Run("scenarios", func(t *testing.T) {
		for i, r := range runs {
			t.Run(r.name+"/"+r.sc.Name, func(t *testing.T) {
				if r.im == nil {
					t.Skip("no " + r.name)
				}
				res := results[i]
				for _, l := range res.t.logs {
					t.Log(l)
				}
				for _, e := range res.t.errors {
					t.Error(e)
				}
				if res.t.Failed() && len(res.t.errors) == 0 {
					t.Error("failed")
				}
				t.Logf("took %s", res.took.Round(time.Millisecond))
			})
		}
	})
	t.Logf("whole suite: %s", time.Since(began).Round(time.Millisecond))
}

// python is the interpreter the Python handler runs on: make test-python's
// virtual environment's, else python3 3.9 or later; missing says why none.
func python(root string) (string, string) {
	if py := filepath.Join(root, "bin", "pyenv", "bin", "python"); fileExists(py) {
		return py, ""
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		return "", "python3 is not installed (Debian: apt-get install python3)"
	}
	out, err := exec.Command(py, "-c", "import sys; print(sys.version_info >= (3, 9))").Output()
	if err != nil || strings.TrimSpace(string(out)) != "True" {
		return "", "python3 is older than 3.9"
	}
	return py, ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// `jobgate conformance --endpoint-cmd` fails a handler that skips a duty,
// naming the scenario: one that runs what it is sent unverified fails
// forgery (CONF_BREAK, handler.py's own switch), and passes the rest.
func TestEndpointRunnerFailsAHandlerThatSkipsADuty(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and spawns jobgate and handler processes")
	}
	t.Parallel()
	root := jobtest.RepoRoot(t)
	py, missing := python(root)
	if missing != "" {
		if skip := jobtest.InteropMissing(t, missing, "the Python endpoint handler", root); skip != "" {
			t.Skip(skip)
		}
	}
	bins, err := binaries()
	require.NoError(t, err)
	cmd := exec.Command(bins[0], "conformance", "--endpoint-cmd", "env CONF_BREAK=verify "+py+" handler.py",
		"--dir", filepath.Join(root, "internal", "conformance", "handlers"), "--name", "broken", "--only", "forgery,permanent")
	cmd.Dir = t.TempDir()
	cmd.Env = jobtest.ChildEnv()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, 1, exit.ExitCode(), "%s", out)
	require.Contains(t, string(out), "FAIL  forgery", "%s", out)
	require.Contains(t, string(out), "ok    permanent", "%s", out)
	require.Contains(t, string(out), "\n1 passed, 1 failed\n", "%s", out)
}

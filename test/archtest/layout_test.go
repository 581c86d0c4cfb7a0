package archtest

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The tree says where things go: the services at the top (gateway,
// dispatcher, renderer, notifier), system (the one assembly) above them and
// imported only by the binary and the harnesses, internal/ for what the
// binary runs and nothing else, test/ for the harnesses, pkg/ for what
// users import. These rules keep it so.

const assembly = module + "/system"

// TestOnlyTheBinaryAndHarnessesImportTheAssembly: nothing below the
// assembly reaches back up to it. cmd/ runs it, test/ harnesses build it,
// and jobgatetest (the public deployment helper for integration tests)
// starts a whole jobgate with it.
func TestOnlyTheBinaryAndHarnessesImportTheAssembly(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	for path, p := range pkgs {
		if !strings.HasPrefix(path, module+"/") || path == assembly || strings.HasPrefix(path, assembly+"/") {
			continue
		}
		rel := strings.TrimPrefix(path, module+"/")
		if strings.HasPrefix(rel, "cmd/") || strings.HasPrefix(rel, "test/") || rel == "pkg/workertest/jobgatetest" {
			continue
		}
		if slices.Contains(p.Deps, assembly) {
			t.Errorf("%s depends on %s: only cmd/, test/ and pkg/workertest/jobgatetest may; move the code that needs the whole system up, or take what it needs as a parameter", rel, "system")
		}
	}
}

// TestProductionCodeDependsOnNoHarness: the harnesses under test/ (chaos,
// end-to-end, cluster, bench fixtures…) never ship: nothing outside test/
// depends on them.
func TestProductionCodeDependsOnNoHarness(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	for path, p := range pkgs {
		rel, ok := strings.CutPrefix(path, module+"/")
		if !ok || strings.HasPrefix(rel, "test/") {
			continue
		}
		for _, dep := range p.Deps {
			if strings.HasPrefix(dep, module+"/test/") {
				t.Errorf("%s depends on the harness %s: harnesses live under test/ and nothing else imports them", rel, strings.TrimPrefix(dep, module+"/"))
			}
		}
	}
}

// TestInternalHoldsOnlyWhatTheBinaryRuns: every package under internal/ is
// linked by the jobgate binary (with the bench tag, which adds `jobgate
// bench`) or by a public package; a harness belongs under test/.
func TestInternalHoldsOnlyWhatTheBinaryRuns(t *testing.T) {
	t.Parallel()
	pkgs := load(t)
	cmd := exec.Command("go", "list", "-tags", "bench", "-deps", "./cmd/...", "./pkg/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	shipped := map[string]bool{}
	for _, line := range strings.Fields(string(out)) {
		shipped[line] = true
	}
	for path := range pkgs {
		rel, ok := strings.CutPrefix(path, module+"/")
		if !ok || !strings.HasPrefix(rel, "internal/") {
			continue
		}
		if !shipped[path] {
			t.Errorf("%s is linked by neither the binary nor a public package: if it is a harness or test helper, it belongs under test/", rel)
		}
	}
}

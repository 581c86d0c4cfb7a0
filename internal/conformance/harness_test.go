package conformance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jobgate/jobgate/test/jobtest"
)

// typescript says whether the TypeScript half can run: node 18.17 or later
// and the pinned packages installed in sdk/typescript. Missing, it fails
// the test, or skips it when JOBGATE_SKIP_INTEROP=1 (never under CI=true).
func typescript(t *testing.T, root string) (dir, why string) {
	t.Helper()
	dir = filepath.Join(root, "sdk", "typescript")
	if missing := jobtest.NodeMissing(dir, nil, jobtest.TSPackages...); missing != "" {
		return "", jobtest.InteropMissing(t, missing, "the TypeScript half", dir)
	}
	return dir, ""
}

// buildTypeScript compiles the library and its conformance worker with
// the pinned tsc into sdk/typescript/dist (kept out of git).
func buildTypeScript(dir string) error {
	cmd := exec.Command("node", filepath.Join("node_modules", "typescript", "bin", "tsc"), "-p", ".")
	cmd.Dir = dir
	cmd.Env = jobtest.ChildEnv()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("tsc: %v\n%s", err, b)
	}
	return nil
}

// binDir holds the binaries the package's tests build (binaries), removed
// when they are done.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "jobgate-conformance-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

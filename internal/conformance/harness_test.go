package conformance

import (
	"fmt"
	"github.com/jobgate/jobgate/internal/jobtest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// typescript says whether the TypeScript half can run: node 18.17 or later
// and the pinned packages installed in sdk/typescript. Missing, it fails
// the test, or skips it when JOBGATE_SKIP_INTEROP=1 (never under CI=true).
func typescript(t *testing.T, root string) (dir, why string) {
	t.Helper()
	dir = filepath.Join(root, "sdk", "typescript")
	missing := func(format string, args ...any) (string, string) {
		msg := fmt.Sprintf(format, args...)
		switch {
		case os.Getenv("CI") == "true":
			t.Fatalf("CI=true and %s; scripts/ensure-interop.sh installs it", msg)
		case os.Getenv("JOBGATE_SKIP_INTEROP") == "1":
			return "", msg
		default:
			t.Fatalf("%s: run scripts/ensure-interop.sh (or `npm ci` in %s), or set JOBGATE_SKIP_INTEROP=1 to skip the TypeScript half", msg, dir)
		}
		return "", msg
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return missing("node is not installed (Debian: apt-get install nodejs npm)")
	}
	out, err := exec.Command(node, "--version").Output()
	require.NoError(t, err)
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	parts := append(strings.Split(v, "."), "0")
	major, _ := strconv.Atoi(parts[0])
	minor, _ := strconv.Atoi(parts[1])
	if major < 18 || major == 18 && minor < 17 {
		return missing("node %s is too old (18.17 or later needed; the suite is run on 20)", v)
	}
	for _, p := range []string{"typescript", "@nats-io/transport-node", "@nats-io/nats-core", "@types/node"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p, "package.json")); err != nil {
			return missing("the npm package %s is not installed in %s", p, dir)
		}
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

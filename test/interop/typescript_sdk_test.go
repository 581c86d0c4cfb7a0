package interop

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

// TestTypeScriptSDK runs the TypeScript worker package's own suite
// (sdk/typescript/test/*.test.ts, node's test runner) against real
// `jobgate serve` processes of the binary built here: jobs run to success,
// failure and cancel; the package exports nothing of the wire and has no
// import cycle; `npm pack` makes a tarball that a new project
// (examples/worker-typescript) installs, compiles against its types and
// runs. Without node, npm or the pinned packages it fails, or skips when
// JOBGATE_SKIP_INTEROP=1 (never under CI=true), as the conformance suite's
// TypeScript half does.
func TestTypeScriptSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("builds jobgate and runs node and npm")
	}
	t.Parallel()
	root := jobtest.RepoRoot(t)
	dir := typescriptSDK(t, root)

	began := time.Now()
	bin := filepath.Join(t.TempDir(), "jobgate")
	built := make(chan error, 1)
	go func() { built <- jobtest.GoBuild(root, bin, "./cmd/jobgate") }()
	// Compiled apart from dist/, which the conformance suite's workers run
	// from meanwhile (tsc rewrites every file it emits).
	out, err := os.MkdirTemp(dir, ".test-build-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(out) })
	tsc := exec.Command("node", filepath.Join("node_modules", "typescript", "bin", "tsc"), "-p", ".", "--outDir", out)
	tsc.Dir, tsc.Env = dir, jobtest.ChildEnv()
	b, err := tsc.CombinedOutput()
	require.NoError(t, err, "tsc: %s", b)
	require.NoError(t, <-built)
	t.Logf("built jobgate and the TypeScript tests in %s", time.Since(began).Round(time.Millisecond))

	tests, err := filepath.Glob(filepath.Join(out, "test", "*.test.js"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(tests), 3, "the suite's files in %s", out)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	began = time.Now()
	node := exec.CommandContext(ctx, "node", append([]string{"--test", "--test-reporter=spec"}, tests...)...)
	node.Dir, node.Env = dir, jobtest.ChildEnv("JOBGATE_BIN="+bin)
	b, err = node.CombinedOutput()
	took := time.Since(began).Round(time.Millisecond)
	require.NoError(t, err, "node --test (%s):\n%s", took, b)
	// The runner's summary: its tests ran, none failed or was skipped.
	summary := string(b)
	require.Contains(t, summary, "ℹ fail 0", summary)
	require.Contains(t, summary, "ℹ skipped 0", summary)
	require.NotContains(t, summary, "ℹ pass 0\n", summary)
	t.Logf("node --test: %s\n%s", took, summary[max(0, strings.LastIndex(summary, "ℹ tests")):])
}

// typescriptSDK is sdk/typescript once node 18.17 or later, npm and the
// pinned packages are there. Missing, it fails the test, or skips it when
// JOBGATE_SKIP_INTEROP=1 and CI is not true.
func typescriptSDK(t *testing.T, root string) string {
	t.Helper()
	dir := filepath.Join(root, "sdk", "typescript")
	if missing := jobtest.NodeMissing(dir, []string{"npm"}, jobtest.TSPackages...); missing != "" {
		t.Skip(jobtest.InteropMissing(t, missing, "the TypeScript SDK's tests", dir))
	}
	return dir
}

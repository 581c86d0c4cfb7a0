package jobtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The tests that run node (the TypeScript SDK and its conformance half,
// the Node endpoint example) share one rule for what is missing: under
// CI=true it fails the test, with JOBGATE_SKIP_INTEROP=1 it is skipped,
// otherwise it fails saying how to install it (scripts/ensure-interop.sh).

// TSPackages are the npm packages the TypeScript SDK builds with.
var TSPackages = []string{"typescript", "@nats-io/transport-node", "@nats-io/nats-core", "@types/node"}

// NodeMissing says what keeps node 18.17 or later from running the
// packages installed in dir (each node_modules/<name>), or "" when
// nothing does; tools are other commands needed on the PATH (npm).
func NodeMissing(dir string, tools []string, packages ...string) string {
	node, err := exec.LookPath("node")
	if err != nil {
		return "node is not installed (Debian: apt-get install nodejs npm)"
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is not installed (Debian: apt-get install nodejs npm)"
		}
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return fmt.Sprintf("node --version failed: %v", err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	parts := append(strings.Split(v, "."), "0")
	major, _ := strconv.Atoi(parts[0])
	minor, _ := strconv.Atoi(parts[1])
	if major < 18 || major == 18 && minor < 17 {
		return fmt.Sprintf("node %s is too old (18.17 or later needed; the suites run on 20)", v)
	}
	for _, p := range packages {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p, "package.json")); err != nil {
			return fmt.Sprintf("the npm package %s is not installed in %s", p, dir)
		}
	}
	return ""
}

// InteropMissing applies the rule to what NodeMissing (or another check)
// found missing for what (the suite's name) in dir: it fails t under
// CI=true or without JOBGATE_SKIP_INTEROP=1, and otherwise returns the
// reason to skip.
func InteropMissing(t testing.TB, missing, what, dir string) (skip string) {
	t.Helper()
	switch {
	case os.Getenv("CI") == "true":
		t.Fatalf("CI=true and %s; scripts/ensure-interop.sh installs it", missing)
	case os.Getenv("JOBGATE_SKIP_INTEROP") == "1":
		return "JOBGATE_SKIP_INTEROP=1 and " + missing
	default:
		t.Fatalf("%s: run scripts/ensure-interop.sh (or `npm ci` in %s), or set JOBGATE_SKIP_INTEROP=1 to skip %s", missing, dir, what)
	}
	return ""
}

package jobtest

import (
	"context"
	"fmt"
	"github.com/jobgate/jobgate/internal/childproc"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Helpers of the tests that run jobgate (or its tools) as processes.

// RepoRoot is the module's root directory, found upwards from the test's
// package directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test's directory")
		dir = parent
	}
}

// FreeAddr is a loopback address with a port nothing listens on now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// ChildEnv is the environment of a child process: this one's without any
// JOBGATE_ or OTEL_ setting, plus extra (childproc.Env).
func ChildEnv(extra ...string) []string { return childproc.Env(extra...) }

// GoBuild builds a package of the module at root into out. The deadline
// keeps a wedged toolchain from hanging the suite until its own timeout.
func GoBuild(root, out, pkg string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = ChildEnv()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

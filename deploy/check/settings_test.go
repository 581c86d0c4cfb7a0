package check

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// root is the jobgate repository, whose deploy/check this module is.
var root = filepath.Join("..", "..")

// knownEnv is every JOBGATE_* variable jobgate's config reads: the names
// internal/config's LoadEnv passes to its readers.
func knownEnv(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "internal", "config", "config.go"))
	require.NoError(t, err)
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`\b(?:str|dur|num|size|boolean)\("(JOBGATE_[A-Z0-9_]+)"`).FindAllStringSubmatch(string(src), -1) {
		out[m[1]] = true
	}
	require.Greater(t, len(out), 30, "LoadEnv's readers were not found: has internal/config changed shape?")
	return out
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// jobgate builds the binary once (the main module's build cache makes it
// quick after make test's first step) for its commands' flags.
func jobgate(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "jobgate-check-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "jobgate")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", binPath, "./cmd/jobgate")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/jobgate: %w\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binPath
}

var (
	flagsMu sync.Mutex
	flags   = map[string]map[string]bool{}
)

// commandFlags are the flags `jobgate <command> -h` lists.
func commandFlags(t *testing.T, command string) map[string]bool {
	t.Helper()
	flagsMu.Lock()
	defer flagsMu.Unlock()
	if f, ok := flags[command]; ok {
		return f
	}
	out, _ := exec.Command(jobgate(t), command, "-h").CombinedOutput() // -h exits non-zero
	f := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`).FindAllStringSubmatch(string(out), -1) {
		f[m[1]] = true
	}
	require.NotEmpty(t, f, "jobgate %s -h listed no flags:\n%s", command, out)
	flags[command] = f
	return f
}

// checkCommand says whether args (a container's command after the
// entrypoint jobgate) name a jobgate command and only flags it has.
func checkCommand(t *testing.T, where string, args []string) {
	t.Helper()
	require.NotEmpty(t, args, "%s: no command", where)
	known := commandFlags(t, args[0])
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		require.True(t, known[name], "%s: jobgate %s has no flag %s", where, args[0], a)
	}
}

// checkEnv says whether every JOBGATE_* variable set is one jobgate reads.
func checkEnv(t *testing.T, where string, names []string) {
	t.Helper()
	known := knownEnv(t)
	for _, n := range names {
		if strings.HasPrefix(n, "JOBGATE_") {
			require.True(t, known[n], "%s sets %s, which jobgate does not read (internal/config LoadEnv)", where, n)
		}
	}
}

// The checks can fail: a made-up setting and a made-up flag are refused.
func TestTheSettingChecksRefuseWhatJobgateDoesNotRead(t *testing.T) {
	require.True(t, knownEnv(t)["JOBGATE_NATS_URL"])
	require.False(t, knownEnv(t)["JOBGATE_NATS_URLS"])
	require.True(t, commandFlags(t, "gateway")["http-addr"])
	require.False(t, commandFlags(t, "gateway")["listen"])
	require.True(t, commandFlags(t, "health")["url"])
}

// Package childproc holds what code that runs jobgate and worker processes
// as children needs (the conformance runner, and the tests through
// test/jobtest): a clean environment and a buffer for their output.
// It imports nothing of jobgate's and no testing package, so the jobgate
// binary can carry it.
package childproc

import (
	"bytes"
	"os"
	"strings"
	"sync"
)

// Env is the environment of a child process: this one's without any
// JOBGATE_ or OTEL_ setting (a developer's shell must not change what is
// tested), plus extra.
func Env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JOBGATE_") && !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// Buffer is a bytes.Buffer safe for concurrent writes (a child process's
// output, a logger's) and reads.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

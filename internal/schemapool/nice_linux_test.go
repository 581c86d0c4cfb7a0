package schemapool

import (
	"context"
	"runtime"
	"syscall"
	"testing"

	"github.com/jobgate/jobgate/internal/schema"
	"github.com/stretchr/testify/require"
)

// niceness is the calling thread's nice value (the raw system call
// answers 20 - nice).
func niceness(t *testing.T) int {
	t.Helper()
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	require.NoError(t, err)
	return 20 - prio
}

// A compile runs on a thread at nice 19, which no other goroutine gets
// afterwards: the caller's thread keeps its priority.
func TestACompileRunsAtTheLowestPriority(t *testing.T) {
	t.Parallel()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := niceness(t)
	var during int
	p := NewWith(1, func(raw []byte) (*schema.Schema, error) {
		during = niceness(t)
		return schema.Compile(raw)
	})
	_, err := p.Compile(context.Background(), closed(1))
	require.NoError(t, err)
	require.Equal(t, 19, during)
	require.Equal(t, before, niceness(t))
}

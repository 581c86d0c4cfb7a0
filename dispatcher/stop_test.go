package dispatcher

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/jobtest"
	"github.com/stretchr/testify/require"
)

func TestStopLeavesNoGoroutineBehind(t *testing.T) {
	// Not parallel: it counts the package's goroutines.
	d, b := setup(t)
	rec := b.env.Commit(t, b.conn.Res, jobtest.Request{Key: "before-stop"})
	require.Eventually(t, func() bool { return len(b.workIDs(t, rec)) == 1 }, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, d.Stop(context.Background()))
	require.NoError(t, d.Stop(context.Background()), "a second Stop is a no-op")
	require.Eventually(t, func() bool { return strings.Count(goroutineDump(), "jobgate/dispatcher.(*") == 0 },
		5*time.Second, 20*time.Millisecond, "goroutines left:\n%s", goroutineDump())
}

func goroutineDump() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

package system_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/jobgate/jobgate/system"
	"github.com/stretchr/testify/require"
)

// serve whose byte budgets no disk here can hold refuses to start, naming
// the settings, and leaves the data dir free for the next try.
func TestServeRefusesBudgetsLargerThanTheDisk(t *testing.T) {
	t.Parallel()
	settings := config.Default()
	settings.DataDir, settings.HTTPAddr = t.TempDir(), "127.0.0.1:0"
	settings.ResultsMaxBytes = 1 << 52 // 4 PiB
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := system.Start(ctx, system.Config{Settings: &settings, LogOutput: io.Discard})
	require.ErrorContains(t, err, "JOBGATE_RESULTS_MAX_BYTES")

	settings.ResultsMaxBytes = config.Default().ResultsMaxBytes
	sys, err := system.Start(ctx, system.Config{Settings: &settings, LogOutput: io.Discard})
	require.NoError(t, err, "the same data dir with budgets that fit")
	require.NoError(t, sys.Stop(context.Background()))
}

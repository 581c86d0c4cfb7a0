package natsjs

import (
	"testing"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/stretchr/testify/require"
)

// The default layout is serve's default settings: a test or a tool that
// provisions it gets the retention and byte budgets serve would, named once
// in internal/config.
func TestDefaultLayoutIsServes(t *testing.T) {
	t.Parallel()
	d, l := config.Default(), DefaultLayout()
	require.Equal(t, d.NATS.Replicas, l.Replicas)
	require.Equal(t, d.JobTTL, l.JobTTL)
	require.Equal(t, d.ResultTTL, l.ResultTTL)
	require.Equal(t, d.StoreMaxBytes, l.StoreMaxBytes)
	require.Equal(t, d.ResultsMaxBytes, l.ResultsMaxBytes)
	require.NoError(t, l.validate())
}

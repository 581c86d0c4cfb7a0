package gateway

import (
	"testing"

	"github.com/jobgate/jobgate/internal/config"
	"github.com/stretchr/testify/require"
)

// A gateway built without settings (a test, a harness) runs with serve's
// defaults, which internal/config names once: changing one there changes
// both, and the gateway repeats none of them.
func TestAZeroConfigTakesServesDefaults(t *testing.T) {
	t.Parallel()
	d := config.Default()
	got := (&Config{}).withDefaults()
	require.Equal(t, d.HTTPAddr, got.Addr)
	require.Equal(t, d.ResultLinkTTL, got.LinkTTL)
	require.Equal(t, d.TenantResultsMaxBytes, got.TenantResultsMaxBytes)
	g := d.Gateway
	require.Equal(t, []any{g.ReadRate, g.ReadBurst, g.SubmitRate, g.SubmitBurst},
		[]any{got.ReadRate, got.ReadBurst, got.SubmitRate, got.SubmitBurst})
	require.Equal(t, []int{g.MaxStreamsPerRequester, g.MaxLongPollsPerRequester, g.MaxStreamsPerTenant, g.MaxLongPollsPerTenant, g.MaxStreams, g.MaxLongPolls},
		[]int{got.MaxStreamsPerRequester, got.MaxLongPollsPerRequester, got.MaxStreamsPerTenant, got.MaxLongPollsPerTenant, got.MaxStreams, got.MaxLongPolls})
	require.Equal(t, g.StreamWriteTimeout, got.StreamWriteTimeout)
	got.AuthSecret = []byte("0123456789abcdef0123456789abcdef")
	require.NoError(t, got.validate(), "with a secret, the defaults are valid")
}

// What is set is kept: a default fills only a zero field.
func TestASetFieldKeepsItsValue(t *testing.T) {
	t.Parallel()
	got := (&Config{Addr: "127.0.0.1:0", MaxStreams: 3, ReadRate: 1, ReadBurst: 2}).withDefaults()
	require.Equal(t, "127.0.0.1:0", got.Addr)
	require.Equal(t, 3, got.MaxStreams)
	require.Equal(t, []any{1.0, 2}, []any{got.ReadRate, got.ReadBurst})
	require.Equal(t, config.Default().Gateway.MaxLongPolls, got.MaxLongPolls)
}
